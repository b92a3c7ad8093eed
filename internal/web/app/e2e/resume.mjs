// The timeline's live updates through a control plane restart and a
// dropped connection: internal/e2e's TestWebTimelineResumesLiveUpdates
// waits for each step line below before it acts (restarts the control
// plane, cuts the page's connections at a proxy) and then adds the next
// message; each must appear in the open page, without a reload, once.
//
// Env: CAST_WEB_LOGIN (a one-time login link), CAST_WEB_SESSION (a
// session whose one message says WEB-MARK-0), CAST_WEB_SHOTS (a folder
// for screenshots), and browser.mjs's.
import { join } from "node:path";
import { drive, need, step } from "./browser.mjs";

const login = need("CAST_WEB_LOGIN");
const sessionId = need("CAST_WEB_SESSION");
const shots = need("CAST_WEB_SHOTS");
const T = 90_000; // a control plane restart (embedded etcd) on 2 busy cores

await drive(shots, async (page) => {
  step("log in with the one-time link");
  await page.goto(login);
  // The link asks before it signs in (login CSRF); the sign-in is its form's POST.
  await Promise.all([page.waitForURL((u) => u.pathname === "/"), page.getByRole("button", { name: "Sign in" }).click()]);
  await page.getByText(/^admin:/).waitFor();
  await page.goto(new URL(`/#/s/${sessionId}`, login).href);
  await page.locator("li.user", { hasText: "WEB-MARK-0" }).waitFor();
  // Every text the status line shows, so a passing "reconnecting" is seen.
  await page.evaluate(() => {
    const el = document.getElementById("status");
    window.castStatuses = [];
    new MutationObserver(() => window.castStatuses.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
  });
  step("the timeline is open; add WEB-MARK-1");
  const said = [await mark(page, 1)];
  step("WEB-MARK-1 arrived live; restart the control plane, then add WEB-MARK-2");
  said.push(await mark(page, 2));
  step("WEB-MARK-2 arrived after the restart; cut the connection, then add WEB-MARK-3");
  said.push(await mark(page, 3));
  await page.screenshot({ path: join(shots, "resumed.png"), fullPage: true });

  console.log(`status lines before each mark: ${JSON.stringify(said)}`);
  if (said.flat().some((s) => /stopped/.test(s))) throw new Error("the page said live updates stopped");
  for (const n of [2, 3]) {
    if (!said[n - 1].some((s) => /reconnecting/.test(s))) throw new Error(`the page did not say it was reconnecting before WEB-MARK-${n}`);
  }
  const now = await page.locator("#status").textContent();
  if (now !== "") throw new Error(`the status line still says ${JSON.stringify(now)} with the stream back`);
  const seqs = await page.evaluate(() => [...document.querySelectorAll("ol.timeline > li")].map((li) => li.dataset.seq));
  if (new Set(seqs).size !== seqs.length) throw new Error(`a message drawn twice: rows ${seqs.join(",")}`);
  console.log(`drawn: ${seqs.join(",")}`);
  step("done");
});

// mark waits for WEB-MARK-n's row, checks it is drawn once, and returns
// what the status line said since the last mark.
async function mark(page, n) {
  const rows = page.locator("ol.timeline > li", { hasText: `WEB-MARK-${n}` });
  await rows.first().waitFor({ timeout: T });
  const count = await rows.count();
  if (count !== 1) throw new Error(`WEB-MARK-${n} drawn ${count} times`);
  return page.evaluate(() => window.castStatuses.splice(0));
}
