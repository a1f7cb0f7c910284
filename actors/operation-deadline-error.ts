/** Why an attempt's request was aborted when its operation's deadline passed (a stable `name`). */
export class OperationDeadlineError extends Error {
  override readonly name = "OperationDeadlineError";
}
