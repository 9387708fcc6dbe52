// An @a2a-js/sdk agent for the recorder's integration tests: one DefaultRequestHandler (ConverseRequestHandler)
// behind JSON-RPC, HTTP+JSON and gRPC (TLS), every reply carrying the converse extension's envelope. Listens on
// 127.0.0.1, free ports; prints one line `READY {"http": PORT, "grpc": PORT}` once both listen.
//
//   node server.mjs CERT.pem KEY.pem
//
// Scenarios, chosen by the text of the user's message (a follow-up on a task continues its routine):
//   hello          a Message answering with coverage, ownership and citations
//   human          a Message a person wrote (author human, human_owned, coverage not recorded)
//   book a table   a Task: the book_table routine asks for date and partySize (input-required)
//     YYYY-MM-DD   ... asks for partySize
//     N people     ... books: an artifact, then completed
//     never mind   ... abandoned: the task is canceled
//   stream report  a Task: working, an artifact in two chunks, completed with a partial answer
//   watch report   a Task for a non-blocking send and SubscribeToTask: it stays working (the send answers with
//                  the submitted task) until a subscription to it has attached, which then gets the rest: a
//                  progress status, an artifact, completed with an answered coverage. No timing is involved: the
//                  subscription waits for `working` to be in the store (its snapshot), the executor for the
//                  subscription; each wait is bounded and fails loudly (the task fails, the subscription errs).
//   fail           a Task that fails, the agent's coverage assessment failed
//   explode        a Task whose executor throws once it is working

import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';

import express from 'express';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';
import { LegacyA2AService, legacyGrpcService } from '@a2a-js/sdk/compat/v0_3/server/grpc';

export const CONVERSE_URI = 'https://docs.radioso.ai/reference/a2a-converse-extension/v1';
const MCP_URL = 'https://mcp.radioso.example/mcp/a/ag_js0peer01';

const [certFile, keyFile] = process.argv.slice(2);

const PENDING = {
  date: { key: 'date', type: 'string', required: true, description: 'The day of the booking' },
  partySize: { key: 'partySize', type: 'integer', required: true, description: 'How many people' },
  note: { key: 'note', type: 'string', required: false, description: 'Anything the restaurant should know' },
};

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });

function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n');
}

function agentMessage(ctx, taskId, words, envelope) {
  return {
    messageId: randomUUID(),
    contextId: ctx.contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [text(words)],
    metadata: { [CONVERSE_URI]: envelope },
    extensions: [CONVERSE_URI],
    referenceTaskIds: [],
  };
}

function coverage(ctx, availability, value, reason) {
  const c = { availability, originatingTurnId: ctx.userMessage.messageId, originatingRequestId: `req-${ctx.userMessage.messageId}` };
  if (value) c.coverage = value;
  if (reason) c.reason = reason;
  return c;
}

const routine = (status, pending) => ({
  toolName: 'book_table',
  name: 'Book a table',
  status,
  pendingInput: pending.map((k) => PENDING[k]),
});

function status(ctx, taskId, state, message) {
  return AgentEvent.statusUpdate({
    taskId,
    contextId: ctx.contextId,
    status: { state, message, timestamp: new Date().toISOString() },
    metadata: undefined,
  });
}

function newTask(ctx) {
  return AgentEvent.task({
    id: ctx.taskId,
    contextId: ctx.contextId,
    status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [ctx.userMessage],
    metadata: undefined,
  });
}

function artifact(ctx, artifactId, words, envelope, append, lastChunk) {
  return AgentEvent.artifactUpdate({
    taskId: ctx.taskId,
    contextId: ctx.contextId,
    artifact: {
      artifactId,
      name: 'report',
      description: '',
      parts: [text(words)],
      metadata: { [CONVERSE_URI]: envelope },
      extensions: [CONVERSE_URI],
    },
    append,
    lastChunk,
    metadata: undefined,
  });
}

const steps = new Map(); // task id -> the slots still open

const WAIT_MS = 10_000; // how long a `watch report` task waits for its subscription, or a subscription for it
const subscriptions = new Map(); // `watch report` task id -> called once a subscription to it has attached

/** Resolves once a subscription to `taskId` has attached (see ConverseRequestHandler); rejects after WAIT_MS. */
function subscription(taskId) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      subscriptions.delete(taskId);
      reject(new Error(`no subscription to task ${taskId} within ${WAIT_MS} ms`));
    }, WAIT_MS);
    subscriptions.set(taskId, () => {
      subscriptions.delete(taskId);
      clearTimeout(timer);
      resolve();
    });
  });
}

class ConverseExecutor {
  async execute(ctx, bus) {
    if (ctx.context.requestedExtensions?.includes?.(CONVERSE_URI)) ctx.context.addActivatedExtension(CONVERSE_URI);
    const said = textOf(ctx.userMessage).trim();
    const taskId = ctx.taskId;
    const ai = { state: 'ai_owned', suppressed: false };
    if (ctx.task && steps.has(taskId)) {
      this.continueRoutine(ctx, bus, said, ai);
    } else if (said === 'hello') {
      bus.publish(AgentEvent.message(agentMessage(ctx, '', 'Hello! We are open 12-15 and 18-23.', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'assessed', 'answered', 'sufficient_evidence'),
        ownership: ai,
        citations: [
          { documentId: 'doc-hours', chunkId: 'c-1', title: 'Opening hours', sourceUrl: 'https://trattoria.example/hours' },
          { documentId: 'doc-faq', chunkId: 'c-7', title: 'FAQ' },
        ],
      })));
    } else if (said === 'human') {
      bus.publish(AgentEvent.message(agentMessage(ctx, '', 'Maria here: I will call you back.', {
        author: 'human',
        answerCoverage: { availability: 'not_recorded' },
        ownership: { state: 'human_owned', suppressed: false },
      })));
    } else if (said === 'book a table') {
      steps.set(taskId, ['date', 'partySize']);
      bus.publish(newTask(ctx));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_WORKING, undefined));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(ctx, taskId, 'For which day, and how many people?', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'not_recorded'),
        ownership: ai,
        routine: routine('waiting_for_input', ['date', 'partySize', 'note']),
        invocation: { toolName: 'book_table', outcome: 'started' },
      })));
    } else if (said === 'stream report') {
      const artifactId = `art-${taskId}`;
      const env = { author: 'agent', ownership: ai, citations: [{ documentId: 'doc-menu', chunkId: 'c-2', title: 'Menu' }] };
      bus.publish(newTask(ctx));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_WORKING, undefined));
      bus.publish(artifact(ctx, artifactId, 'Part one of the report.', env, false, false));
      bus.publish(artifact(ctx, artifactId, 'Part two of the report.', env, true, true));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_COMPLETED, agentMessage(ctx, taskId, 'The report covers the menu only.', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'assessed', 'partial', 'insufficient_evidence'),
        ownership: ai,
        citations: [{ documentId: 'doc-menu', chunkId: 'c-2', title: 'Menu', sourceUrl: 'https://trattoria.example/menu' }],
      })));
    } else if (said === 'watch report') {
      const attached = subscription(taskId); // registered before the task exists: no subscription can miss it
      bus.publish(newTask(ctx)); // the non-blocking send's answer
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_WORKING, undefined));
      await attached;
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_WORKING, agentMessage(ctx, taskId, 'Reading the wine list.', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'not_recorded'),
        ownership: ai,
      })));
      const env = { author: 'agent', ownership: ai, citations: [{ documentId: 'doc-wine', chunkId: 'c-3', title: 'Wine list' }] };
      bus.publish(artifact(ctx, `wine-${taskId}`, 'Three reds, two whites.', env, false, true));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_COMPLETED, agentMessage(ctx, taskId, 'The wine list is attached.', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'assessed', 'answered', 'sufficient_evidence'),
        ownership: ai,
        citations: [{ documentId: 'doc-wine', chunkId: 'c-3', title: 'Wine list', sourceUrl: 'https://trattoria.example/wine' }],
      })));
    } else if (said === 'fail') {
      bus.publish(newTask(ctx));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_FAILED, agentMessage(ctx, taskId, 'Something went wrong.', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'failed'),
        ownership: ai,
      })));
    } else if (said === 'explode') {
      bus.publish(newTask(ctx));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_WORKING, undefined));
      throw new Error('the kitchen is on fire');
    } else {
      bus.publish(AgentEvent.message(agentMessage(ctx, '', 'I did not understand.', {
        author: 'agent',
        answerCoverage: coverage(ctx, 'assessed', 'unclear', 'ambiguous_request'),
        ownership: ai,
      })));
    }
    bus.finished();
  }

  continueRoutine(ctx, bus, said, ai) {
    const taskId = ctx.taskId;
    const base = { author: 'agent', ownership: ai, invocation: { toolName: 'book_table', outcome: 'reentered' } };
    bus.publish(AgentEvent.task(ctx.task)); // the SDK's server wants a stream to open with the task
    bus.publish(status(ctx, taskId, TaskState.TASK_STATE_WORKING, undefined));
    if (said === 'never mind') {
      steps.delete(taskId);
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_CANCELED, agentMessage(ctx, taskId, 'No problem, nothing was booked.', {
        ...base,
        answerCoverage: coverage(ctx, 'assessed', 'unanswered', 'intentional_scope_boundary'),
        routine: routine('abandoned', []),
      })));
    } else if (/^\d{4}-\d\d-\d\d$/.test(said)) {
      steps.set(taskId, ['partySize']);
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(ctx, taskId, 'How many people?', {
        ...base,
        answerCoverage: coverage(ctx, 'not_recorded'),
        routine: routine('waiting_for_input', ['partySize', 'note']),
      })));
    } else {
      steps.delete(taskId);
      const env = { ...base, routine: routine('completed', []) };
      bus.publish(artifact(ctx, `booking-${taskId}`, `Booked: ${said}.`, env, false, true));
      bus.publish(status(ctx, taskId, TaskState.TASK_STATE_COMPLETED, agentMessage(ctx, taskId, 'Your table is booked.', {
        ...env,
        answerCoverage: coverage(ctx, 'assessed', 'answered', 'sufficient_evidence'),
      })));
    }
  }

  async cancelTask(taskId, bus) {
    bus.finished();
  }
}

const card = {
  name: 'JS Trattoria',
  description: 'An @a2a-js/sdk agent that books tables',
  supportedInterfaces: [],
  provider: undefined,
  version: '1.3.0-test',
  documentationUrl: '',
  capabilities: {
    streaming: true,
    pushNotifications: false,
    extendedAgentCard: false,
    extensions: [
      {
        uri: CONVERSE_URI,
        description: 'Radioso conversation extension',
        required: false,
        params: {
          mcp: { url: MCP_URL, serverCardUrl: `${MCP_URL}/server-card` },
          tools: [
            {
              toolName: 'book_table',
              description: 'Book a table for a date and party size.',
              inputSchema: {
                type: 'object',
                properties: { date: { type: 'string' }, partySize: { type: 'integer' } },
                required: ['date', 'partySize'],
              },
            },
          ],
        },
      },
    ],
  },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    { id: 'book_table', name: 'Book a table', description: 'Books a table', tags: ['booking'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
    { id: 'ask_agent', name: 'Ask', description: 'Answers questions', tags: ['faq'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  ],
  signatures: [],
  iconUrl: '',
};

/** The SDK's handler, with SubscribeToTask (v0.3 tasks/resubscribe, TaskSubscription) made deterministic for the
 * `watch report` tasks, and activating the converse extension on a subscription as the executor does on a send. */
class ConverseRequestHandler extends DefaultRequestHandler {
  // Not a generator itself: the extension is activated before a transport writes its response head.
  resubscribe(params, context) {
    if (context.requestedExtensions?.includes?.(CONVERSE_URI)) context.addActivatedExtension(CONVERSE_URI);
    return this.#attach(params, context);
  }

  async *#attach(params, context) {
    const attached = subscriptions.get(params.id);
    if (attached) await this.#stored(params.id, context, TaskState.TASK_STATE_WORKING); // the snapshot is `working`
    let first = true;
    for await (const event of super.resubscribe(params, context)) {
      // the SDK listens on the task's event bus from its first step on: the executor may go on
      if (first) attached?.();
      first = false;
      yield event;
    }
  }

  /** Waits, briefly polling the store, for the task to reach `state` (the send's background drain saves it). */
  async #stored(taskId, context, state) {
    const deadline = Date.now() + WAIT_MS;
    while ((await this.taskStore.load(taskId, context))?.status?.state !== state) {
      if (Date.now() > deadline) throw new Error(`task ${taskId} not ${state} within ${WAIT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
}

const handler = new ConverseRequestHandler(card, new InMemoryTaskStore(), new ConverseExecutor());
const compat = { enabled: true };

const grpcServer = new Server();
grpcServer.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
grpcServer.addService(LegacyA2AService, legacyGrpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const creds = ServerCredentials.createSsl(null, [{ private_key: readFileSync(keyFile), cert_chain: readFileSync(certFile) }]);
const grpcPort = await new Promise((resolve, reject) =>
  grpcServer.bindAsync('127.0.0.1:0', creds, (err, port) => (err ? reject(err) : resolve(port))),
);

const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, legacyCompat: compat }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: compat }));
app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: compat }));
const http = await new Promise((resolve, reject) => {
  const s = app.listen(0, '127.0.0.1', () => resolve(s));
  s.on('error', reject);
});
const httpPort = http.address().port;
const base = `http://127.0.0.1:${httpPort}`;
for (const version of ['1.0', '0.3']) {
  card.supportedInterfaces.push(
    { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: version },
    { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: version },
    { url: `127.0.0.1:${grpcPort}`, protocolBinding: 'GRPC', tenant: '', protocolVersion: version },
  );
}

const stop = () => {
  http.close();
  grpcServer.forceShutdown();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
console.log(`READY ${JSON.stringify({ http: httpPort, grpc: grpcPort })}`);
