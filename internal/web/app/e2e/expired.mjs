// The timeline's read of a session across an expired page token:
// internal/e2e's TestWebTimelineRestartsAnExpiredListing serves pages of a
// few messages, and this script holds the page's second ListMessages (the
// first with a page token) until the test has compacted the store past
// the token's revision. The server must refuse that page as expired
// (INVALID_PAGE_TOKEN), and the page must read the rest again from after
// the last message it has: every message drawn once, in order, and no
// error said.
//
// Env: CAST_WEB_LOGIN (a one-time login link), CAST_WEB_SESSION (a
// session of CAST_WEB_COUNT user messages), CAST_WEB_RELEASE (a file the
// test writes once it compacted), CAST_WEB_SHOTS (a folder for
// screenshots), and browser.mjs's.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { drive, need, step } from "./browser.mjs";

const login = need("CAST_WEB_LOGIN");
const sessionId = need("CAST_WEB_SESSION");
const count = Number(need("CAST_WEB_COUNT"));
const release = need("CAST_WEB_RELEASE");
const shots = need("CAST_WEB_SHOTS");

await drive(shots, async (page) => {
  step("log in with the one-time link");
  await page.goto(login);
  await Promise.all([page.waitForURL((u) => u.pathname === "/"), page.getByRole("button", { name: "Sign in" }).click()]);
  await page.getByText(/^admin:/).waitFor();

  let calls = 0;
  let refused = "";
  await page.route("**/cast.v1.SessionService/ListMessages", async (route) => {
    if (++calls !== 2) return route.continue();
    step("a page token held; compact the store");
    while (!existsSync(release)) await sleep(20); // the test's file: it compacted
    const resp = await route.fetch();
    refused = await resp.text();
    await route.fulfill({ response: resp, body: refused });
  });
  await page.goto(new URL(`/#/s/${sessionId}`, login).href);
  // Every row drawn, or the page said it failed.
  await page.waitForFunction(
    (n) => document.querySelectorAll("ol.timeline > li").length >= n || document.getElementById("status").className.includes("alert"),
    count,
  );
  await page.screenshot({ path: join(shots, "expired.png"), fullPage: true });

  if (!expiredToken(refused)) throw new Error(`the held page was not refused as an expired token: ${refused.slice(0, 300)}`);
  const status = await page.locator("#status").textContent();
  if (status !== "") throw new Error(`the page said ${JSON.stringify(status)}`);
  const seqs = await page.evaluate(() => [...document.querySelectorAll("ol.timeline > li")].map((li) => li.dataset.seq));
  if (new Set(seqs).size !== seqs.length) throw new Error(`a message drawn twice: rows ${seqs.join(",")}`);
  console.log(`drawn: ${seqs.join(",")}`);
  step("done");
});

// expiredToken says body is a Connect error whose google.rpc.ErrorInfo
// gives the reason INVALID_PAGE_TOKEN.
function expiredToken(body) {
  let err;
  try {
    err = JSON.parse(body);
  } catch {
    return false;
  }
  return (err.details ?? []).some(
    (d) => d.type === "google.rpc.ErrorInfo" && Buffer.from(d.value, "base64").toString("latin1").includes("INVALID_PAGE_TOKEN"),
  );
}
