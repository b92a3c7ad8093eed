// The API clients: the control plane's own gRPC services, reached by
// Connect on this origin. The session cookie (HttpOnly) is the credential;
// the server maps it to the principal that made the login link.
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AccountService } from "./gen/cast/v1/account_service_pb";
import { AgentService } from "./gen/cast/v1/agent_service_pb";
import { AuthService } from "./gen/cast/v1/auth_service_pb";
import { MigrationService } from "./gen/cast/v1/migration_service_pb";
import { NodeService } from "./gen/cast/v1/node_service_pb";
import { SessionService } from "./gen/cast/v1/session_service_pb";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb";

// SIGNED_OUT is dispatched on window when a call finds the browser signed
// out (or the credential behind its cookie revoked); the app then shows
// how to sign in, whichever page made the call.
export const SIGNED_OUT = "cast:signed-out";

const signedOut: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (isUnauthenticated(err)) window.dispatchEvent(new Event(SIGNED_OUT));
    throw err;
  }
};

const transport = createConnectTransport({
  baseUrl: window.location.origin,
  useBinaryFormat: true,
  interceptors: [signedOut],
});

export const sessions = createClient(SessionService, transport);
export const nodes = createClient(NodeService, transport);
export const migrations = createClient(MigrationService, transport);
export const accounts = createClient(AccountService, transport);
export const agentsApi = createClient(AgentService, transport);
export const auth = createClient(AuthService, transport);

/** errorText is what a person reads of a refused call. */
export function errorText(err: unknown): string {
  if (err instanceof ConnectError) {
    if (err.code === Code.Unauthenticated) {
      return "Not signed in: run `cast web` for a login link. (" + err.rawMessage + ")";
    }
    return err.rawMessage;
  }
  return String(err);
}

// ERROR_DOMAIN is the ErrorInfo domain of cast's errors
// (controlplane.ErrorDomain).
const ERROR_DOMAIN = "cast.dev";

/**
 * reasonOf is the stable reason the control plane gave a refused call
 * (its google.rpc.ErrorInfo: internal/errs' Reason*), or "" for none.
 */
export function reasonOf(err: unknown): string {
  if (!(err instanceof ConnectError)) return "";
  return err.findDetails(ErrorInfoSchema).find((i) => i.domain === ERROR_DOMAIN)?.reason ?? "";
}

/** BAD_PAGE_TOKEN: a page token refused (errs.ReasonBadPageToken), such as one expired. */
export const BAD_PAGE_TOKEN = "INVALID_PAGE_TOKEN";

/** isUnauthenticated says the browser is not signed in (or its sign-in lapsed). */
export function isUnauthenticated(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Unauthenticated;
}

/** isAbort says a call was ended by the page (a navigation), not refused. */
export function isAbort(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Canceled;
}

/**
 * heals says watching again can get past what ended a stream: the control
 * plane stopping or lost (a restart; Unavailable), the connection dropped
 * (fetch reports it as Unknown, a body cut short as Internal), a deadline,
 * or the server canceling it while the page still wants it. A session
 * gone or not the caller's, or a browser signed out, stays so.
 */
export function heals(err: unknown): boolean {
  return err instanceof ConnectError && healing.has(err.code);
}

const healing = new Set([Code.Unavailable, Code.Unknown, Code.Internal, Code.DeadlineExceeded, Code.Canceled]);

/** requestId makes a retried mutation store once. */
export function requestId(): string {
  return crypto.randomUUID();
}
