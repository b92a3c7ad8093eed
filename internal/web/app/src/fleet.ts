// Fleet: nodes with their agents, sessions per node, migrations with
// per-session progress; start a drain.
import { create } from "@bufbuild/protobuf";
import { errorText, isAbort, migrations, nodes, requestId } from "./api";
import { ago, h, say } from "./dom";
import { MigrationState, type Migration } from "./gen/cast/v1/migration_pb";
import { StartMigrationRequestSchema } from "./gen/cast/v1/migration_service_pb";
import type { Node } from "./gen/cast/v1/node_pb";
import { listAll } from "./inbox";
import { date } from "./labels";

export async function fleet(main: HTMLElement, signal: AbortSignal): Promise<void> {
  const nodesBox = h("div", { class: "scroll-x" });
  const migBox = h("div", {});
  const from = h("select", { id: "drain-from" });
  const to = h("select", { id: "drain-to" });
  const skip = h("input", { id: "drain-skip", type: "checkbox" });
  main.replaceChildren(
    h("h1", {}, "Fleet"),
    h("h2", {}, "Nodes"),
    nodesBox,
    h("h2", {}, "Migrations"),
    h(
      "form",
      { class: "filters", onsubmit: (e: Event) => (e.preventDefault(), void drain()) },
      h("label", { for: "drain-from" }, "Drain"),
      from,
      h("label", { for: "drain-to" }, "to"),
      to,
      skip,
      h("label", { for: "drain-skip" }, "Sessions only (leave work trees)"),
      h("button", { type: "submit" }, "Start drain"),
    ),
    migBox,
  );
  const drain = async () => {
    try {
      const m = await migrations.startMigration(
        create(StartMigrationRequestSchema, { fromNode: from.value, to: to.value, skipWorktree: skip.checked, requestId: requestId() }),
      );
      say(`Migration ${m.id} started.`);
      await load();
    } catch (err) {
      say("Drain refused: " + errorText(err), true);
    }
  };
  const load = async () => {
    try {
      const [ns, ms, ss] = await Promise.all([allNodes(signal), allMigrations(signal), listAll("", signal)]);
      const per = new Map<string, number>();
      for (const s of ss) per.set(s.node, (per.get(s.node) ?? 0) + 1);
      nodesBox.replaceChildren(nodeTable(ns, per));
      migBox.replaceChildren(...(ms.length ? ms.map(migration) : [h("p", { class: "muted" }, "No migrations.")]));
      for (const sel of [from, to]) {
        const keep = sel.value;
        sel.replaceChildren(...ns.map((n) => h("option", { value: n.name }, n.name)));
        if (keep) sel.value = keep;
      }
    } catch (err) {
      if (!isAbort(err)) say(errorText(err), true);
    }
  };
  await load();
  const timer = setInterval(load, 3000);
  signal.addEventListener("abort", () => clearInterval(timer));
}

async function allNodes(signal: AbortSignal): Promise<Node[]> {
  const out: Node[] = [];
  let pageToken = "";
  do {
    const r = await nodes.listNodes({ pageToken }, { signal });
    out.push(...r.nodes);
    pageToken = r.nextPageToken;
  } while (pageToken);
  return out;
}

async function allMigrations(signal: AbortSignal): Promise<Migration[]> {
  const r = await migrations.listMigrations({ pageSize: 50 }, { signal });
  return r.migrations;
}

function nodeTable(ns: Node[], per: Map<string, number>): HTMLElement {
  return h(
    "table",
    { class: "nodes" },
    h("caption", { class: "sr-only" }, "Nodes"),
    h("thead", {}, h("tr", {}, ...["Node", "Up", "Labels", "OS", "Agents", "Sessions", "Last seen"].map((t) => h("th", { scope: "col" }, t)))),
    h(
      "tbody",
      {},
      ...ns.map((n) =>
        h(
          "tr",
          { "data-node": n.name },
          h("th", { scope: "row" }, n.name),
          h("td", {}, n.connected ? "connected" : "down"),
          h("td", {}, [...n.labels, ...Object.entries(n.adminLabels).map(([k, v]) => `${k}=${v}`)].join(", ")),
          h("td", {}, n.os),
          h(
            "td",
            {},
            h("ul", { class: "agents" }, ...n.agents.map((a) => h("li", {}, `${a.name} ${a.version}`, h("span", { class: a.ready ? "ok" : "warn" }, a.ready ? " ready" : ` ${a.status || "not ready"}`)))),
          ),
          h("td", {}, String(per.get(n.name) ?? 0)),
          h("td", {}, ago(date(n.lastSeenTime))),
        ),
      ),
    ),
  );
}

function migration(m: Migration): HTMLElement {
  const done = m.sessions.filter((s) => s.state === MigrationState.SUCCEEDED).length;
  return h(
    "section",
    { class: "migration", "aria-label": `Migration ${m.id}` },
    h("h3", {}, `${m.id} → ${m.targetNode || m.target}`, " ", h("span", { class: "muted" }, MigrationState[m.state].toLowerCase())),
    h("progress", { max: m.sessions.length || 1, value: done, "aria-label": "sessions moved" }),
    h("span", {}, ` ${done} of ${m.sessions.length} sessions`),
    h("ul", {}, ...m.sessions.map((s) => h("li", {}, h("a", { href: `#/s/${s.sessionId}` }, s.sessionId), ` ${MigrationState[s.state].toLowerCase()}`, s.reason ? ` — ${s.reason}` : ""))),
  );
}
