// `keel/testing`: what makes a whole session deterministic in users' own tests.
export { SimulatedClock } from "xstate";
export {
  type FaultyToolOptions,
  faultyModel,
  faultyTool,
  killableStore,
  type ModelFault,
  type ModelFaultPlan,
  modelFaultError,
  scheduledClockSteps,
  scheduledModel,
  scheduledTool,
  type TaskScheduler,
  type ToolFault,
} from "./actors/fault-injection.ts";
export { seededIds } from "./actors/ids.ts";
export {
  type RecordedRequest,
  type Script,
  type ScriptedModel,
  type ScriptStep,
  scriptedModel,
} from "./providers/scripted-model.ts";
