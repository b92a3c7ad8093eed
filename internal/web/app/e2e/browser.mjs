// The browser the e2e scripts drive: Debian's chromium, headless, with
// playwright-core (no browser download). Each script (drive.mjs,
// resume.mjs) is a scenario that internal/e2e runs against a real control
// plane; on a failure it leaves a screenshot, the status line and the
// last rows drawn.
//
// Env: CHROMIUM (default /usr/bin/chromium), CAST_WEB_PROFILE (an empty
// folder for the browser's profile).
import { chromium } from "playwright-core";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function need(k) {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
}

// step says what the scenario does next (internal/e2e may wait for it).
export function step(what) {
  console.log(`step: ${what}`);
}

// drive runs scenario(page) in a fresh browser, saving a screenshot to
// shots on a failure, and exits the process: 0 when it passed and the
// page threw nothing.
export async function drive(shots, scenario) {
  // A fresh profile: the test's temp dir (removed with it), else a new one.
  const profile = process.env.CAST_WEB_PROFILE || mkdtempSync(join(tmpdir(), "cast-chromium-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 900 },
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  // Two cores shared by the whole suite: a step may wait long for its turn.
  page.setDefaultTimeout(60_000);
  const consoleErrors = [];
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  let failed = false;
  try {
    await scenario(page);
  } catch (err) {
    failed = true;
    console.error(`FAILED: ${err?.stack ?? err}`);
    await page.screenshot({ path: join(shots, "failure.png"), fullPage: true }).catch(() => {});
    console.error(`status line: ${await page.locator("#status").textContent().catch(() => "?")}`);
    const tail = await page
      .evaluate(() => [...document.querySelectorAll("ol.timeline > li")].slice(-4).map((li) => `${li.className} #${li.dataset.seq}: ${li.textContent.slice(0, 90)}`))
      .catch(() => []);
    console.error(`last rows:\n${tail.join("\n")}`);
  } finally {
    await browser.close();
  }
  if (consoleErrors.length) {
    console.error(`page errors: ${consoleErrors.join("\n")}`);
    failed = true;
  }
  process.exit(failed ? 1 : 0);
}
