// A listing read across an expired page token: internal/e2e's
// TestWebTimelineRestartsAnExpiredListing (a session's messages, in pages
// of a few) and TestWebInboxRestartsAnExpiredListing (more sessions than
// the inbox's page) hold the page's second call of the listing (the first
// with a page token) until the test has compacted the store past the
// token's revision. The server must refuse that page as expired
// (INVALID_PAGE_TOKEN), and the page must read the listing again: every
// row drawn once, and no error said.
//
// Env: CAST_WEB_LOGIN (a one-time login link), CAST_WEB_LISTING
// ("messages": the timeline of CAST_WEB_SESSION; "sessions": the inbox),
// CAST_WEB_COUNT (the rows it must draw), CAST_WEB_RELEASE (a file the test
// writes once it compacted), CAST_WEB_SHOTS (a folder for screenshots),
// and browser.mjs's.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { drive, need, step } from "./browser.mjs";

const login = need("CAST_WEB_LOGIN");
const listing = need("CAST_WEB_LISTING");
const count = Number(need("CAST_WEB_COUNT"));
const release = need("CAST_WEB_RELEASE");
const shots = need("CAST_WEB_SHOTS");
const { method, hash, rows, key } =
  listing === "messages"
    ? { method: "ListMessages", hash: `#/s/${need("CAST_WEB_SESSION")}`, rows: "ol.timeline > li", key: "seq" }
    : { method: "ListSessions", hash: "#/", rows: "tbody tr[data-session]", key: "session" };

await drive(shots, async (page) => {
  step("log in with the one-time link");
  await page.goto(login);
  await Promise.all([page.waitForURL((u) => u.pathname === "/"), page.getByRole("button", { name: "Sign in" }).click()]);
  await page.getByText(/^admin:/).waitFor();

  let calls = 0;
  let refused = "";
  await page.route(`**/cast.v1.SessionService/${method}`, async (route) => {
    if (++calls !== 2) return route.continue();
    step("a page token held; compact the store");
    while (!existsSync(release)) await sleep(20); // the test's file: it compacted
    const resp = await route.fetch();
    refused = await resp.text();
    await route.fulfill({ response: resp, body: refused });
  });
  await page.goto(new URL(`/${hash}`, login).href);
  // Every row drawn, or the page said it failed.
  await page.waitForFunction(
    ([sel, n]) => document.querySelectorAll(sel).length >= n || document.getElementById("status").className.includes("alert"),
    [rows, count],
  );
  await page.screenshot({ path: join(shots, `expired-${listing}.png`), fullPage: true });

  if (!expiredToken(refused)) throw new Error(`the held page was not refused as an expired token: ${refused.slice(0, 300)}`);
  const status = await page.locator("#status").textContent();
  if (status !== "") throw new Error(`the page said ${JSON.stringify(status)}`);
  const keys = await page.evaluate(([sel, k]) => [...document.querySelectorAll(sel)].map((el) => el.dataset[k]), [rows, key]);
  if (new Set(keys).size !== keys.length) throw new Error(`a row drawn twice: ${keys.join(",")}`);
  if (listing === "sessions") keys.sort();
  console.log(`drawn: ${keys.join(",")}`);
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
