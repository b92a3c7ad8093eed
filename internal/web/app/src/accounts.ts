// Accounts: fleet accounts per agent with their usage windows, which is
// active, the policy, and the sessions parked on a limit.
import { accounts, errorText, isAbort } from "./api";
import { h, say } from "./dom";
import type { Account } from "./gen/cast/v1/account_pb";
import { listAll } from "./inbox";
import { date } from "./labels";

export async function accountsPage(main: HTMLElement, signal: AbortSignal): Promise<void> {
  main.replaceChildren(h("h1", {}, "Accounts"), h("p", { class: "muted" }, "Loading…"));
  try {
    const [r, parked] = await Promise.all([accounts.listAccounts({ pageSize: 1000 }, { signal }), listAll('state = "parked"', signal)]);
    const body: HTMLElement[] = [];
    for (const f of r.fleet) {
      body.push(
        h("h2", {}, f.agent),
        h("p", {}, `Policy ${f.policy} · active ${f.active || "none"} · a switch would pick ${f.best || "none"}`),
        h("div", { class: "scroll-x" }, accountTable(r.accounts.filter((a) => a.agent === f.agent))),
      );
    }
    if (!r.fleet.length) body.push(h("p", { class: "muted" }, "No fleet accounts (cast account add)."));
    body.push(
      h("h2", {}, "Parked sessions"),
      parked.length
        ? h("ul", {}, ...parked.map((s) => h("li", {}, h("a", { href: `#/s/${s.id}` }, s.title || s.id), ` — ${s.agent}: ${s.stateReason}`)))
        : h("p", { class: "muted" }, "None."),
    );
    main.replaceChildren(h("h1", {}, "Accounts"), ...body);
  } catch (err) {
    if (!isAbort(err)) say(errorText(err), true);
  }
}

function accountTable(as: Account[]): HTMLElement {
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, ...["Account", "Active", "Policy", "Usage", "Limited until"].map((t) => h("th", { scope: "col" }, t)))),
    h(
      "tbody",
      {},
      ...as.map((a) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, a.name),
          h("td", {}, a.active ? "active" : ""),
          h("td", {}, a.policy || "fleet"),
          h("td", {}, ...a.usage.map((w) => h("div", {}, h("meter", { min: 0, max: 100, value: w.usedPercent, "aria-label": w.name }), ` ${w.name} ${Math.round(w.usedPercent)}%`))),
          h("td", {}, date(a.limitedUntil)?.toLocaleString() ?? ""),
        ),
      ),
    ),
  );
}
