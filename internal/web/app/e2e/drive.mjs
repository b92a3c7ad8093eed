// Drives the web timeline in Debian's chromium, headless, with
// playwright-core (no browser download): internal/e2e's TestWebTimeline
// runs it against a real control plane, node and agent CLIs on the fake
// model, then checks the store for what the page did.
//
// Env: CAST_WEB_LOGIN (a one-time login link), CAST_WEB_SESSION (a
// session on Claude with one turn done), CAST_WEB_BIG (a session of 10,000
// imported messages), CAST_WEB_NEW_CWD (a folder on the node for a session the
// page starts), CAST_WEB_OIDC_EMAIL (the person the control plane's
// fake OIDC issuer signs in), CAST_WEB_SHOTS (a folder for screenshots),
// and browser.mjs's.
import { join } from "node:path";
import { drive, need, step } from "./browser.mjs";

const login = need("CAST_WEB_LOGIN");
const sessionId = need("CAST_WEB_SESSION");
const shots = need("CAST_WEB_SHOTS");
const big = need("CAST_WEB_BIG"); // a 10,000-message session
const oidcEmail = need("CAST_WEB_OIDC_EMAIL"); // whom the fake issuer signs in
const newCwd = need("CAST_WEB_NEW_CWD"); // a folder on the node for a session the page starts
const T = 120_000; // a real CLI's turn on 2 busy cores

await drive(shots, (page) => {
  // Every move the page sends, so a doubled one shows in the log.
  page.on("request", (r) => {
    if (/Handoff|Fork|Switch/.test(r.url())) console.log(`request: ${new URL(r.url()).pathname}`);
  });
  return run(page);
});

// shot saves the page; fullPage: false keeps the viewport as it is (a
// full-page capture makes it as tall as the page, which grows the
// transcript's box and scrolls it).
async function shot(p, name, fullPage = true) {
  const path = join(shots, `${name}.png`);
  await p.screenshot({ path, fullPage });
  console.log(`screenshot: ${path}`);
  await labelled(p, name);
}

// labelled fails a page with a form control that has no name a screen
// reader can say (a <label>, aria-label, or a button's own text).
async function labelled(p, name) {
  const bare = await p.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea, button")]
      .filter((el) => el.offsetParent !== null || el.closest("dialog[open]"))
      .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !(el.tagName === "BUTTON" && el.textContent.trim()))
      .map((el) => el.outerHTML.slice(0, 120)),
  );
  if (bare.length) throw new Error(`${name}: controls without a label:\n${bare.join("\n")}`);
}

async function run(page) {
  step("log in with the one-time link");
  await page.goto(login);
  // The link asks before it signs in (login CSRF); the sign-in is its form's POST.
  await Promise.all([page.waitForURL((u) => u.pathname === "/"), page.getByRole("button", { name: "Sign in" }).click()]);
  if (new URL(page.url()).search !== "") throw new Error(`the login code stayed in the address bar: ${page.url()}`);
  await page.getByText(/^admin:/).waitFor();

  step("inbox lists the session");
  const row = page.locator(`tr[data-session="${sessionId}"]`);
  await row.waitFor();
  await row.getByText("claude").waitFor();
  await shot(page, "inbox");

  step("start a session from the inbox, see its answer, archive it");
  await page.locator("#new-agent").selectOption("claude");
  await page.locator("#new-cwd").fill(newCwd);
  await page.locator("#new-text").fill("started in the browser WEB-NEW-1");
  await page.getByRole("button", { name: "Start" }).click();
  await page.locator("li.assistant", { hasText: "WEB-NEW-1" }).waitFor({ timeout: T });
  const created = new URL(page.url()).hash.replace("#/s/", "");
  await page.getByRole("button", { name: "Archive" }).click();
  await page.getByRole("heading", { name: "Inbox" }).waitFor();
  await row.waitFor();
  if (await page.locator(`tr[data-session="${created}"]`).count()) throw new Error(`archived session ${created} is still in the inbox`);
  console.log(`created and archived: ${created}`);

  step("open the session");
  await row.getByRole("link").click();
  await page.locator("#agent-name", { hasText: "Claude Code" }).waitFor();
  await page.getByText("Live session · picks apply in place").waitFor();
  await page.locator("li.assistant").first().waitFor();

  step("send a message and watch the turn arrive live");
  await page.getByRole("textbox", { name: "Message" }).fill("hello from the browser WEB-LIVE-1");
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator("li.user", { hasText: "WEB-LIVE-1" }).waitFor({ timeout: T });
  await page.locator("li.assistant", { hasText: "last user said: hello from the browser WEB-LIVE-1" }).waitFor({ timeout: T });
  await shot(page, "timeline");

  step("a tool that asks: approve it from the page");
  await page.getByRole("textbox", { name: "Message" }).fill("TOOLCALL CMD[touch web-approved.txt]");
  await page.keyboard.press("Control+Enter");
  await page.locator("#state", { hasText: "waiting on a permission" }).waitFor({ timeout: T });
  await page.getByRole("region", { name: "Permission" }).waitFor();
  await shot(page, "permission");
  await page.getByRole("button", { name: "Approve" }).click();
  await page.locator("#status", { hasText: "Approved" }).waitFor();
  await page.locator("#state", { hasText: "idle" }).waitFor({ timeout: T });
  // The call and its result fold into one row.
  const tool = page.locator("li.tool", { hasText: "touch web-approved.txt" }).last();
  await tool.locator(".tool-state", { hasText: "done" }).waitFor({ timeout: T });

  step("Cursor is labelled and refused");
  const pick = page.getByLabel("Agent", { exact: true });
  const cursor = pick.locator('option[value="cursor"]');
  const label = await cursor.textContent();
  if (label !== "Cursor — can't rebuild history") throw new Error(`cursor's option reads ${JSON.stringify(label)}`);
  await pick.selectOption("cursor");
  await page.getByRole("button", { name: "Switch agent" }).click();
  await page.locator("#status", { hasText: "Switch refused: Cursor cannot take over" }).waitFor();
  await page.locator("#agent-name", { hasText: "Claude Code" }).waitFor();

  step("fork as Codex: a stub, then a row");
  await pick.selectOption("codex");
  await page.getByRole("button", { name: "Fork as" }).click();
  await page.locator(".forks a", { hasText: "on Codex" }).waitFor();
  // The fork's own page links back to its parent.
  await page.locator(".forks a", { hasText: "on Codex" }).click();
  await page.locator("p.muted", { hasText: /^fork of / }).waitFor();
  await page.getByRole("link", { name: `open ${sessionId}` }).click();
  await page.locator("#agent-name", { hasText: "Claude Code" }).waitFor();

  step("switch to Codex from the panel and see the divider");
  await pick.selectOption("codex");
  await page.getByRole("button", { name: "Switch agent" }).click();
  await page.getByRole("separator", { name: /Now using Codex/ }).waitFor();
  await page.locator("#agent-name", { hasText: "Codex" }).waitFor();
  await page.getByRole("textbox", { name: "Message" }).fill("over to codex WEB-LIVE-2");
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator("li.assistant", { hasText: "last user said: over to codex WEB-LIVE-2" }).waitFor({ timeout: T });
  await shot(page, "switched");

  step("hand off to Claude Code: a fresh session, linked");
  await pick.selectOption("claude");
  await page.getByRole("button", { name: "Hand off to" }).click();
  await page.locator(".forks a", { hasText: "Handed off to" }).waitFor({ timeout: 60_000 });

  step("command palette: a verb, then a page");
  await page.keyboard.press("Control+k");
  await page.getByRole("combobox", { name: "Command" }).fill("interrupt");
  await page.keyboard.press("Enter");
  await page.locator("#status", { hasText: "Nothing to stop." }).waitFor();
  await page.keyboard.press("Control+k");
  await page.getByRole("combobox", { name: "Command" }).fill("fleet");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Fleet" }).waitFor();
  await page.locator('tr[data-node="spare"]').waitFor();

  step("drain the node onto the spare and follow the migration");
  await page.getByLabel("Drain", { exact: true }).selectOption("worker");
  await page.getByLabel("to", { exact: true }).selectOption("spare");
  await page.getByLabel("Sessions only (leave work trees)").check();
  await page.getByRole("button", { name: "Start drain" }).click();
  const mig = page.locator("section.migration").first();
  await mig.waitFor();
  await mig.locator("h3", { hasText: "succeeded" }).waitFor({ timeout: 180_000 });
  await shot(page, "fleet");

  step("accounts");
  await page.getByRole("link", { name: "Accounts" }).click();
  await page.getByRole("heading", { name: "Parked sessions" }).waitFor();
  await shot(page, "accounts");

  step("a 10,000-message session opens at its end, pages as you scroll up and down, and keeps at most three pages drawn");
  const t0 = Date.now();
  await page.goto(new URL(`/#/s/${big}`, login).href);
  await page.locator('li[data-seq="10000"]').waitFor();
  console.log(`figure: the 10,000-message session's newest page shown in ${Date.now() - t0} ms`);
  const rows = () => page.locator("ol.timeline > li").count();
  if ((await rows()) > 200) throw new Error(`${await rows()} rows drawn at first; want one page (200 messages)`);
  if (await page.locator('li[data-seq="1"]').count()) throw new Error("the first message was loaded at once");
  // Its last two: thinking, folded; a user's image, shown.
  await page.locator("li.thinking details", { hasText: "Thinking" }).last().waitFor();
  const img = page.locator("li.user", { hasText: "WEB-IMAGE" }).locator("img");
  await img.waitFor();
  if (!(await img.evaluate((el) => el.complete && el.naturalWidth === 1))) throw new Error("the user's image did not load");
  await shot(page, "big-session", false);
  // (The drain above added a migration notice: the newest seq is past 10,000.)
  const first = await rows();
  await page.locator(".scroller").evaluate((el) => (el.scrollTop = 0));
  await page.waitForFunction((n) => document.querySelectorAll("ol.timeline > li").length > n, first);
  if ((await rows()) > 2 * first + 2) throw new Error(`${await rows()} rows after one page up from ${first}; want one more page`);
  if (await page.locator('li[data-seq="1"]').count()) throw new Error("scrolling up once loaded the whole session");
  // Four pages further up: at most three pages are drawn at once, so the
  // newest rows leave the page (and come back on the way down).
  const scroller = page.locator(".scroller");
  const edge = (which) => page.evaluate((w) => {
    const rows = document.querySelectorAll("ol.timeline > li");
    return rows[w === "top" ? 0 : rows.length - 1]?.getAttribute("data-seq");
  }, which);
  for (let i = 0; i < 4; i++) {
    const top = await edge("top");
    await scroller.evaluate((el) => (el.scrollTop = 0));
    await page.waitForFunction((s) => document.querySelector("ol.timeline > li")?.getAttribute("data-seq") !== s, top);
  }
  const up = await rows();
  console.log(`figure: ${up} rows drawn five pages up a 10,000-message session`);
  if (up > 3 * 200) throw new Error(`${up} rows drawn five pages up; want at most three pages (600)`);
  if (await page.locator('li[data-seq="10000"]').count()) throw new Error("the newest page stayed drawn five pages up");
  for (let i = 0; i < 8 && !(await page.locator('li[data-seq="10000"]').count()); i++) {
    const bottom = await edge("bottom");
    await scroller.evaluate((el) => (el.scrollTop = el.scrollHeight));
    await page.waitForFunction((s) => {
      const rows = document.querySelectorAll("ol.timeline > li");
      return rows[rows.length - 1]?.getAttribute("data-seq") !== s;
    }, bottom);
  }
  await page.locator('li[data-seq="10000"]').waitFor();
  if ((await rows()) > 3 * 200) throw new Error(`${await rows()} rows drawn back at the end; want at most three pages`);

  step("a phone-sized viewport");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(new URL("/#/", login).href);
  await page.locator(`tr[data-session="${sessionId}"]`).waitFor();
  await shot(page, "phone-inbox");
  await page.locator(`tr[data-session="${sessionId}"]`).getByRole("link").click();
  await page.getByRole("separator", { name: /Now using Codex/ }).waitFor();
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  if (width > 390) throw new Error(`the timeline is ${width}px wide on a 390px screen`);
  await page.getByRole("textbox", { name: "Message" }).fill("from the phone WEB-LIVE-3");
  await page.getByRole("button", { name: "Send" }).click();
  // An answer after it (the model's last user item is the migration's
  // notice, which the drain put after it).
  await page.locator('li.user:has-text("WEB-LIVE-3") ~ li.assistant').first().waitFor({ timeout: T });
  await shot(page, "phone-timeline");

  step("sign out: the API refuses the browser, the page says how to sign in");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in" }).waitFor();
  await page.goto(new URL("/#/", login).href);
  await page.getByRole("heading", { name: "Sign in" }).waitFor();
  await shot(page, "signed-out");

  step("sign in at the identity provider (OIDC, PKCE): a user who sees only its own sessions");
  // The fake issuer approves whoever its URL names (&email=), as the
  // person would by logging in there: the app's redirect to it gets that
  // added (a route sees only the first request of a redirect chain).
  await page.route(
    (u) => u.pathname === "/auth/oidc",
    async (route) => {
      const resp = await route.fetch({ maxRedirects: 0 });
      const to = new URL(resp.headers()["location"]);
      to.searchParams.set("email", oidcEmail);
      await route.fulfill({ status: 302, headers: { ...resp.headers(), location: to.href } });
    },
  );
  await page.getByRole("link", { name: "Sign in with your identity provider" }).click();
  await page.getByText(`user:${oidcEmail}`).waitFor();
  await page.getByRole("heading", { name: "Inbox" }).waitFor();
  await page.getByText("No sessions.").waitFor();
  await shot(page, "oidc-user");
  step("done");
}
