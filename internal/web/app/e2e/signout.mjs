// Sign-out that the control plane did not do: internal/e2e's
// TestWebSignOutSaysWhenItFailed. The first sign-out is answered as the
// control plane answers one its store failed (503, "sign-out failed;
// retry"); the page must say the browser is still signed in, not
// "Signed out.", and stay signed in. The second goes through: the page
// says so and the API then refuses the browser.
//
// Env: CAST_WEB_LOGIN (a one-time login link), CAST_WEB_SHOTS (a folder
// for screenshots), and browser.mjs's.
import { join } from "node:path";
import { drive, need, step } from "./browser.mjs";

const login = need("CAST_WEB_LOGIN");
const shots = need("CAST_WEB_SHOTS");

await drive(shots, async (page) => {
  step("log in with the one-time link");
  await page.goto(login);
  await Promise.all([page.waitForURL((u) => u.pathname === "/"), page.getByRole("button", { name: "Sign in" }).click()]);
  await page.getByText(/^admin:/).waitFor();

  step("sign out, refused by the store");
  await page.route("**/auth/logout", (route) => route.fulfill({ status: 503, contentType: "text/plain", body: "sign-out failed; retry\n" }), { times: 1 });
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForFunction(() => document.getElementById("status").textContent !== "");
  const said = await page.locator("#status").textContent();
  await page.screenshot({ path: join(shots, "signout-failed.png"), fullPage: true });
  if (!/still signed in/.test(said)) throw new Error(`after a failed sign-out the page said ${JSON.stringify(said)}`);
  if ((await page.locator("#who").textContent()) === "") throw new Error("after a failed sign-out the page no longer names who is signed in");
  if ((await whoAmI(page)) !== 200) throw new Error("the browser is signed out although the sign-out failed");

  step("sign out");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByText("Signed out.").waitFor();
  const status = await whoAmI(page);
  if (status !== 401) throw new Error(`WhoAmI after signing out: HTTP ${status}, want 401`);
  step("done");
});

// whoAmI is the HTTP status of a Connect WhoAmI from the page.
function whoAmI(page) {
  return page.evaluate(async () => {
    const r = await fetch("/cast.v1.AuthService/WhoAmI", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1" },
      body: "{}",
    });
    return r.status;
  });
}
