// An @a2a-js/sdk client for the recorder's integration tests. It fetches the agent card through an HTTP proxy, then
// holds the scripted conversation of server.mjs once per RUN (sends, GetTask, then a non-blocking send and
// SubscribeToTask), and prints on stdout, as one JSON document, what it sent and every message, task, event and
// artifact it received: the ground truth the recorded rows are checked against. HTTP goes through the proxy by
// undici's ProxyAgent; gRPC by grpc-js's CONNECT support (`grpc_proxy`).
//
//   grpc_proxy=PROXY node client.mjs BASE_URL PROXY_URL CA.pem RUN...      RUN: BINDING:VERSION:unary|stream
//
// BINDING is JSONRPC, HTTP+JSON or GRPC, VERSION 1.0 or 0.3.

import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';

import { ProxyAgent, fetch as proxiedFetch } from 'undici';
import { credentials } from '@grpc/grpc-js';
import { Role, roleToJSON, taskStateToJSON } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  ServiceParameters,
  withA2AExtensions,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';

const CONVERSE_URI = 'https://docs.radioso.ai/reference/a2a-converse-extension/v1';
const [baseUrl, proxyUrl, caFile, ...runs] = process.argv.slice(2);

const dispatcher = new ProxyAgent(proxyUrl);
const fetchImpl = (url, init) => proxiedFetch(url, { ...init, dispatcher });
const compat = { enabled: true };
const options = { serviceParameters: ServiceParameters.create(withA2AExtensions(CONVERSE_URI)) };

const blank = (v) => (v === undefined || v === null || v === '' ? null : v);

function textOf(parts) {
  return (parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n');
}

/** One sighting, as the recorder should see it: ids fall back to the enclosing task's. */
function sighting(obj, objectKind, where, eventIndex, container) {
  return {
    where,
    event_index: eventIndex,
    object_kind: objectKind,
    message_id: blank(objectKind === 'artifact' ? obj.artifactId : obj.messageId),
    artifact_name: objectKind === 'artifact' ? blank(obj.name) : null,
    context_id: blank(obj.contextId) ?? blank(container.contextId),
    task_id: blank(obj.taskId) ?? blank(container.taskId),
    role: objectKind === 'artifact' ? null : roleToJSON(obj.role),
    task_state: container.state === undefined ? null : taskStateToJSON(container.state),
    text: textOf(obj.parts),
    extensions: obj.extensions ?? [],
    envelope: obj.metadata?.[CONVERSE_URI] ?? null,
  };
}

function taskSightings(task, where, eventIndex) {
  const c = { contextId: task.contextId, taskId: task.id }; // a task state belongs to its status message alone
  const out = (task.history ?? []).map((m, i) => sighting(m, 'message', `${where}.history[${i}]`, eventIndex, c));
  if (task.status?.message) {
    const s = { ...c, state: task.status.state };
    out.push(sighting(task.status.message, 'message', `${where}.status.message`, eventIndex, s));
  }
  (task.artifacts ?? []).forEach((a, i) => out.push(sighting(a, 'artifact', `${where}.artifacts[${i}]`, eventIndex, c)));
  return out;
}

/** The sightings of one StreamResponse payload (`$case`/`value`), or of a unary result. */
function payloadSightings(payload, eventIndex) {
  const v = payload.value;
  switch (payload.$case) {
    case 'message':
      return [sighting(v, 'message', 'message', eventIndex, { contextId: v.contextId, taskId: v.taskId })];
    case 'task':
      return taskSightings(v, 'task', eventIndex);
    case 'statusUpdate': {
      const c = { contextId: v.contextId, taskId: v.taskId, state: v.status?.state };
      return v.status?.message ? [sighting(v.status.message, 'message', 'statusUpdate.status.message', eventIndex, c)] : [];
    }
    case 'artifactUpdate': {
      const c = { contextId: v.contextId, taskId: v.taskId };
      return v.artifact ? [sighting(v.artifact, 'artifact', 'artifactUpdate.artifact', eventIndex, c)] : [];
    }
    default:
      return [];
  }
}

function lastState(payloads) {
  let state = null;
  for (const p of payloads) {
    const s = p.$case === 'task' ? p.value.status?.state : p.$case === 'statusUpdate' ? p.value.status?.state : undefined;
    if (s !== undefined) state = taskStateToJSON(s);
  }
  return state;
}

function userMessage(text, contextId, taskId) {
  return {
    messageId: randomUUID(),
    contextId: contextId ?? '',
    taskId: taskId ?? '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const failure = (e) => ({ name: e?.constructor?.name ?? 'Error', message: String(e?.message ?? e) });

/** A send; `returnImmediately` makes it non-blocking (v0.3: `blocking: false`): the agent answers at once. */
async function send(client, streaming, text, contextId, taskId, returnImmediately = false) {
  const message = userMessage(text, contextId, taskId);
  const configuration = returnImmediately ? { returnImmediately: true } : undefined;
  const request = { tenant: '', message, configuration, metadata: undefined };
  const payloads = [];
  let error = null;
  try {
    if (streaming) {
      for await (const event of client.sendMessageStream(request, options)) payloads.push(event.payload);
    } else {
      const result = await client.sendMessage(request, options);
      payloads.push('id' in result ? { $case: 'task', value: result } : { $case: 'message', value: result });
    }
  } catch (e) {
    error = failure(e);
  }
  const sightings = payloads.flatMap((p, i) => payloadSightings(p, streaming ? i : null));
  const ids = payloads.map((p) => p.value).find((v) => v.contextId) ?? {};
  return {
    op: 'send',
    text,
    streamed: streaming,
    return_immediately: returnImmediately,
    request: { message_id: message.messageId, context_id: blank(message.contextId), task_id: blank(message.taskId) },
    events: payloads.map((p) => p.$case),
    task_state: lastState(payloads),
    sightings,
    error,
    context_id: ids.contextId ?? null,
    task_id: payloads.map((p) => (p.$case === 'task' ? p.value.id : p.value.taskId)).find((t) => t) ?? null,
  };
}

async function getTask(client, id) {
  const call = { op: 'get', task_id: id, streamed: false, events: [], sightings: [], error: null, task_state: null };
  call.context_id = null;
  try {
    const task = await client.getTask({ tenant: '', id, historyLength: 10 }, options);
    call.context_id = task.contextId;
    call.sightings = taskSightings(task, 'task', null);
    call.task_state = taskStateToJSON(task.status.state);
  } catch (e) {
    call.error = failure(e);
  }
  return call;
}

/** SubscribeToTask (v0.3 tasks/resubscribe, gRPC TaskSubscription): every event until the stream ends. */
async function subscribe(client, id) {
  const payloads = [];
  let error = null;
  try {
    for await (const event of client.resubscribeTask({ tenant: '', id }, options)) payloads.push(event.payload);
  } catch (e) {
    error = failure(e);
  }
  return {
    op: 'subscribe',
    task_id: id,
    streamed: true,
    events: payloads.map((p) => p.$case),
    // the state of the task snapshot a subscription opens with
    snapshot_state: payloads[0]?.$case === 'task' ? lastState(payloads.slice(0, 1)) : null,
    task_state: lastState(payloads),
    sightings: payloads.flatMap((p, i) => payloadSightings(p, i)),
    error,
    context_id: payloads.map((p) => p.value).find((v) => v.contextId)?.contextId ?? null,
  };
}

async function conversation(client, streaming) {
  const calls = [];
  const hello = await send(client, streaming, 'hello');
  calls.push(hello);
  calls.push(await send(client, streaming, 'human', hello.context_id));
  const book = await send(client, streaming, 'book a table');
  calls.push(book);
  calls.push(await send(client, streaming, '2026-12-24', book.context_id, book.task_id));
  calls.push(await send(client, streaming, '4 people', book.context_id, book.task_id));
  const again = await send(client, streaming, 'book a table');
  calls.push(again);
  calls.push(await send(client, streaming, 'never mind', again.context_id, again.task_id));
  calls.push(await send(client, streaming, 'stream report'));
  calls.push(await send(client, streaming, 'fail'));
  calls.push(await send(client, streaming, 'explode'));
  calls.push(await getTask(client, book.task_id));
  calls.push(await getTask(client, 'no-such-task'));
  // a non-blocking send (whatever the run's mode) answers with the submitted task; the agent holds it working
  // until the subscription attaches, which then receives the rest of it
  const watch = await send(client, false, 'watch report', undefined, undefined, true);
  calls.push(watch);
  calls.push(await subscribe(client, watch.task_id));
  return calls;
}

const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: compat });
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    cardResolver: resolver,
    transports: [
      new JsonRpcTransportFactory({ fetchImpl, legacyCompat: compat }),
      new RestTransportFactory({ fetchImpl, legacyCompat: compat }),
      new GrpcTransportFactory({ grpcChannelCredentials: credentials.createSsl(readFileSync(caFile)), legacyCompat: compat }),
    ],
  }),
);

const out = [];
for (const run of runs) {
  const [binding, version, mode] = run.split(':');
  const card = await resolver.resolve(baseUrl);
  const chosen = card.supportedInterfaces.filter((i) => i.protocolBinding === binding && i.protocolVersion === version);
  if (chosen.length !== 1) throw new Error(`card has no single ${binding} ${version} interface`);
  const client = await factory.createFromAgentCard({ ...card, supportedInterfaces: chosen });
  const calls = await conversation(client, mode === 'stream');
  out.push({ run, binding, version, streaming: mode === 'stream', interface: chosen[0].url, calls });
}
// a pipe is written asynchronously: exit (grpc-js channels would keep the process alive) once it is flushed
process.stdout.write(JSON.stringify({ runs: out }) + '\n', () => process.exit(0));
