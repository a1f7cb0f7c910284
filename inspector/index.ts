export { createFeed, type Feed, type FeedListener, type FeedOptions } from "./feed.ts";
export { agentRecord, type InspectRecord, inspectionRecord, stateString } from "./records.ts";
export { replayRecords } from "./replay.ts";
export { type Inspector, type InspectorOptions, startInspector } from "./server.ts";
