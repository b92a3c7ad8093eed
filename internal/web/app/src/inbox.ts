// Inbox: every session the caller may see, newest activity first, with
// filters the server applies (ListSessions' filter) and a text search.
import { BAD_PAGE_TOKEN, sessions, errorText, isAbort, reasonOf, requestId } from "./api";
import { ago, h, say } from "./dom";
import { SessionState, type Session } from "./gen/cast/v1/session_pb";
import { agentList, date, lineage, stateClass, stateLabel } from "./labels";

const states: [string, string][] = [
  ["", "any state"],
  ["running", "running"],
  ["waiting_permission", "waiting on a permission"],
  ["parked", "parked on a limit"],
  ["failed", "failed"],
  ["idle", "idle"],
];

// listAll reads every session filter matches (the first 5,000), following
// page tokens. A token expires when the store is compacted past the
// revision the listing reads at (the hourly compaction, or NOSPACE
// recovery); the listing is one snapshot, so it starts again.
export async function listAll(filter: string, signal: AbortSignal): Promise<Session[]> {
  let out: Session[] = [];
  for (let pageToken = ""; ; ) {
    let r;
    try {
      r = await sessions.listSessions({ pageSize: 500, pageToken, filter, includeSubagents: true }, { signal });
    } catch (err) {
      // A token's refusal only: a first page refused stays refused.
      if (!pageToken || reasonOf(err) !== BAD_PAGE_TOKEN) throw err;
      out = [];
      pageToken = "";
      continue;
    }
    out.push(...r.sessions);
    pageToken = r.nextPageToken;
    if (!pageToken || out.length >= 5000) return out;
  }
}

export async function inbox(main: HTMLElement, signal: AbortSignal): Promise<void> {
  const agentSel = h("select", { id: "f-agent" }, h("option", { value: "" }, "any agent"));
  for (const a of await agentList()) agentSel.append(h("option", { value: a.name }, a.displayName));
  const stateSel = h("select", { id: "f-state" }, ...states.map(([v, t]) => h("option", { value: v }, t)));
  const search = h("input", { id: "f-text", type: "search", placeholder: "title, id, node, model" });
  const body = h("tbody");
  const table = h(
    "table",
    { class: "sessions" },
    h("caption", {}, "Sessions"),
    h(
      "thead",
      {},
      h("tr", {}, ...["Session", "Agent", "Model", "Node", "State", "Last activity", "Lineage"].map((t) => h("th", { scope: "col" }, t))),
    ),
    body,
  );
  main.replaceChildren(
    h("h1", {}, "Inbox"),
    await newSessionForm(),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: (e: Event) => e.preventDefault() },
      h("label", { for: "f-agent" }, "Agent"),
      agentSel,
      h("label", { for: "f-state" }, "State"),
      stateSel,
      h("label", { for: "f-text" }, "Search"),
      search,
    ),
    h("div", { class: "scroll-x" }, table),
  );
  let rows: Session[] = [];
  const draw = () => {
    const q = search.value.trim().toLowerCase();
    const shown = rows
      .filter((s) => !q || [s.id, s.title, s.node, s.model, s.agent].some((f) => f.toLowerCase().includes(q)))
      .sort((a, b) => (date(b.updateTime)?.getTime() ?? 0) - (date(a.updateTime)?.getTime() ?? 0));
    body.replaceChildren(
      ...shown.map((s) =>
        h(
          "tr",
          { "data-session": s.id },
          h("td", {}, h("a", { href: `#/s/${s.id}` }, s.title || s.id), h("div", { class: "muted mono" }, s.id)),
          h("td", { "data-label": "agent" }, s.agent),
          h("td", { "data-label": "model" }, s.model || "default"),
          h("td", { "data-label": "node" }, s.node),
          h("td", {}, h("span", { class: stateClass(s) }, stateLabel(s))),
          h("td", {}, ago(date(s.updateTime))),
          h("td", {}, lineage(s)),
        ),
      ),
    );
    if (shown.length === 0) body.append(h("tr", {}, h("td", { colspan: 7 }, "No sessions.")));
  };
  const load = async () => {
    const parts: string[] = [];
    if (agentSel.value) parts.push(`agent = "${agentSel.value}"`);
    if (stateSel.value) parts.push(`state = "${stateSel.value}"`);
    try {
      rows = await listAll(parts.join(" AND "), signal);
      draw();
    } catch (err) {
      if (!isAbort(err)) say(errorText(err), true);
    }
  };
  agentSel.addEventListener("change", load);
  stateSel.addEventListener("change", load);
  search.addEventListener("input", draw);
  await load();
  // Sessions have no list watch: the inbox rereads every few seconds.
  const timer = setInterval(load, 5000);
  signal.addEventListener("abort", () => clearInterval(timer));
}

// newSessionForm starts a session as `cast new` does: an agent, the
// folder it runs in on the node the control plane places it on, and the
// first message; the timeline opens on it.
async function newSessionForm(): Promise<HTMLElement> {
  const agent = h("select", { id: "new-agent" });
  for (const a of await agentList()) agent.append(h("option", { value: a.name }, a.displayName));
  const cwd = h("input", { id: "new-cwd", type: "text", required: true, placeholder: "/path/to/project", autocomplete: "off" });
  const text = h("input", { id: "new-text", type: "text", placeholder: "first message (optional)", autocomplete: "off" });
  const create = async () => {
    try {
      const s = await sessions.createSession({ agent: agent.value, cwd: cwd.value.trim(), text: text.value, requestId: requestId() });
      location.hash = `#/s/${s.id}`;
    } catch (err) {
      say("New session refused: " + errorText(err), true);
    }
  };
  return h(
    "form",
    { class: "filters", "aria-label": "New session", onsubmit: (e: Event) => (e.preventDefault(), void create()) },
    h("label", { for: "new-agent" }, "New session:"),
    agent,
    h("label", { for: "new-cwd" }, "in folder"),
    cwd,
    h("label", { for: "new-text" }, "saying"),
    text,
    h("button", { type: "submit" }, "Start"),
  );
}

export { SessionState };
