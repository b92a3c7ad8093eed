// cast's web timeline: a hash router over four pages.
import "./style.css";
import { auth, errorText, isUnauthenticated, SIGNED_OUT } from "./api";
import { accountsPage } from "./accounts";
import { h, say } from "./dom";
import { fleet } from "./fleet";
import { inbox } from "./inbox";
import { installPalette, resetCommands } from "./palette";
import { timeline } from "./timeline";

const main = document.getElementById("main")!;
let current: AbortController | undefined;

async function route(): Promise<void> {
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  resetCommands();
  say("");
  const path = location.hash.replace(/^#/, "") || "/";
  for (const a of document.querySelectorAll<HTMLAnchorElement>("nav a")) {
    const here = a.getAttribute("href") === "#" + path || (path.startsWith("/s/") && a.getAttribute("href") === "#/");
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  try {
    const m = path.match(/^\/s\/([^/]+)$/);
    if (m) await timeline(main, decodeURIComponent(m[1]), ctl.signal);
    else if (path === "/fleet") await fleet(main, ctl.signal);
    else if (path === "/accounts") await accountsPage(main, ctl.signal);
    else await inbox(main, ctl.signal);
  } catch (err) {
    if (ctl.signal.aborted) return;
    if (isUnauthenticated(err)) await signIn(); // signed out, or the credential behind the cookie was revoked
    else say(errorText(err), true);
  }
}

// whoami names the signed-in principal, or shows how to sign in.
async function whoami(): Promise<boolean> {
  try {
    const r = await auth.whoAmI({});
    document.getElementById("who")!.textContent = r.principal;
    return true;
  } catch (err) {
    if (!isUnauthenticated(err)) {
      say(errorText(err), true);
      return true;
    }
    await signIn();
    return false;
  }
}

async function signIn(): Promise<void> {
  const methods = (await fetch("/auth/methods").then((r) => r.json())) as { oidc: boolean };
  main.replaceChildren(
    h("h1", {}, "Sign in"),
    h("p", {}, "Run ", h("code", {}, "cast web"), " on a machine where cast is set up: it opens this app signed in as you, with a link that works once."),
    ...(methods.oidc ? [h("p", {}, h("a", { href: "/auth/oidc", id: "oidc-signin" }, "Sign in with your identity provider"))] : []),
  );
}

document.getElementById("signout")!.addEventListener("click", async () => {
  // Signed out only when the control plane says it ended the session: a
  // refused or unanswered sign-out leaves the cookie live, and saying
  // "Signed out." would leave a shared browser signed in unawares.
  let r: Response | undefined;
  try {
    r = await fetch("/auth/logout", { method: "POST" });
  } catch {
    // the network failed: r stays unset
  }
  if (!r?.ok) {
    const why = r ? (await r.text()).trim() || `HTTP ${r.status}` : "the control plane did not answer";
    say(`Sign-out failed (${why}); this browser is still signed in.`, true);
    return;
  }
  document.getElementById("who")!.textContent = "";
  current?.abort();
  await signIn();
  say("Signed out.");
});
installPalette();
window.addEventListener(SIGNED_OUT, () => {
  current?.abort();
  document.getElementById("who")!.textContent = "";
  void signIn();
});
void (async () => {
  if (!(await whoami())) return;
  window.addEventListener("hashchange", () => void route());
  await route();
})();
