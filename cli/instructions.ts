/**
 * The instructions `keel run` and `keel demo` send: what the workspace is and what each
 * built-in tool does, so a real model knows where it works and how.
 */
export function workspaceInstructions(
  root: string,
  tools: readonly { name: string; description: string }[],
): string {
  return [
    "You are a coding agent working in one workspace directory on the user's machine.",
    `The workspace is ${root}. Every path you pass to a tool is relative to it; paths outside it are refused.`,
    "Work in small steps: look before you change anything (list_dir, glob, grep, read_file), change files with edit_file or write_file, and check the result. Independent reads can be asked for together: they run in parallel.",
    'A tool result that starts with "Error (" names what was wrong and how to fix it: fix the call rather than repeating it. High-risk tools may be declined by the user; then stop and explain.',
    "When you are done, answer with a short summary of what you did and anything left to do.",
    "Tools:",
    ...tools.map((t) => `- ${t.name}: ${t.description.split("\n")[0]}`),
  ].join("\n");
}
