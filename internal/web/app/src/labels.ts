import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { SessionState, type Session } from "./gen/cast/v1/session_pb";
import type { RegisteredAgent } from "./gen/cast/v1/agent_service_pb";
import { agentsApi } from "./api";

export function stateLabel(s: Session): string {
  switch (s.state) {
    case SessionState.IDLE:
      return "idle";
    case SessionState.RUNNING:
      return "running";
    case SessionState.WAITING_PERMISSION:
      return "waiting on a permission" + (s.stateReason ? `: ${s.stateReason}` : "");
    case SessionState.PARKED:
      return "parked on a limit" + (s.stateReason ? `: ${s.stateReason}` : "");
    case SessionState.FAILED:
      return "failed" + (s.stateReason ? `: ${s.stateReason}` : "");
    default:
      return "unknown";
  }
}

export function stateClass(s: Session): string {
  return "state state-" + SessionState[s.state].toLowerCase();
}

export function date(t: Timestamp | undefined): Date | undefined {
  return t ? timestampDate(t) : undefined;
}

/** lineage names where a session came from. */
export function lineage(s: Session): string {
  if (s.subagent && s.parentId) return `worker of ${s.parentId}`;
  if (s.parentId) return `fork of ${s.parentId} at ${s.forkedAtSeq}`;
  if (s.handoffFrom) return `handed off from ${s.handoffFrom}`;
  return "";
}

let registry: Promise<RegisteredAgent[]> | undefined;

/** agentList is the server's registry with its takeover check. */
export function agentList(): Promise<RegisteredAgent[]> {
  registry ??= agentsApi.listAgents({}).then((r) => r.agents);
  return registry;
}

export async function displayName(name: string): Promise<string> {
  const a = (await agentList()).find((x) => x.name === name);
  return a?.displayName ?? name;
}
