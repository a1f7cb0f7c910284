// react-dom ships no types and @types/react-dom is not a dependency: the one function the
// example page uses, typed here.
declare module "react-dom/client" {
  import type { ReactNode } from "react";
  export function createRoot(container: Element): {
    render(node: ReactNode): void;
    unmount(): void;
  };
}
