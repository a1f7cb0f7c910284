// `keel/testing`: what makes a whole session deterministic in users' own tests.
export { SimulatedClock } from "xstate";
export { seededIds } from "./actors/ids.ts";
export {
  type RecordedRequest,
  type Script,
  type ScriptedModel,
  type ScriptStep,
  scriptedModel,
} from "./providers/scripted-model.ts";
