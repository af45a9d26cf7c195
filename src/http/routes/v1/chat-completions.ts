/**
 * POST /v1/chat/completions. The checks run in the contract's order:
 * authentication (the scope's hook), body, model, context, then the database
 * decides daily cap and credits in one reservation.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errors, GatewayError } from '../../../errors.js';
import type { ChatRequest, StoredCompletion } from '../../../gateway/chat-types.js';
import type { CompletionService, StreamOutput } from '../../../gateway/completion.js';
import type { ChatMessage } from '../../../providers/types.js';
import type { IdempotencyClaim, Store } from '../../../store/types.js';
import type { Metrics } from '../../../metrics.js';
import { CompletionRecord } from '../../completion-log.js';
import { allowOnly, parseBody } from '../../errors.js';
import type { ChatCompletionBody } from '../../schemas/chat-completion.js';
import { chatCompletionBody } from '../../schemas/chat-completion.js';
import { sendStream } from '../../sse-response.js';

export interface ChatRouteDeps {
  store: Store;
  completions: CompletionService;
  maxInFlight: number;
  metrics: Metrics;
  /** `logging.prompts`: the completion log line carries the messages. */
  logPrompts: boolean;
}

export function chatCompletionRoutes(app: FastifyInstance, deps: ChatRouteDeps): void {
  let inFlight = 0;
  allowOnly(app, '/chat/completions', ['POST']);
  app.post('/chat/completions', async (request, reply) => {
    const record = new CompletionRecord(request, reply, { metrics: deps.metrics, logPrompts: deps.logPrompts });
    try {
      return await complete(request, reply, record);
    } catch (err) {
      record.failed(err);
      throw err;
    } finally {
      record.finish();
    }
  });

  async function complete(request: FastifyRequest, reply: FastifyReply, record: CompletionRecord): Promise<unknown> {
    const controller = watchClient(reply);
    const caller = request.caller!;
    const body = parseBody(chatCompletionBody, request.body);
    const chat = toChatRequest(body);
    const checked = deps.completions.check(chat);
    record.passedChecks(checked);
    const idempotencyKey = idempotencyKeyOf(request);
    if (inFlight >= deps.maxInFlight) throw errors.overloaded(1);
    // The slot is taken before the first await, so that no burst can pass the limit between check and count.
    inFlight += 1;
    try {
      if (idempotencyKey !== null) {
        const claim = await deps.store.claimIdempotencyKey(caller.accountId, idempotencyKey, fingerprint(request.body));
        if (claim.state !== 'claimed') return await answerClaim(claim, chat, reply, record);
      }
      let admission;
      try {
        if (controller.signal.aborted) throw errors.upstreamUnavailable('The client closed the connection.');
        admission = await deps.completions.reserve(caller, checked, idempotencyKey);
        record.admitted(admission);
      } catch (err) {
        // Refused before it reached the ledger: the key is free for a retry.
        if (idempotencyKey !== null) await deps.store.abandonIdempotencyKey(caller.accountId, idempotencyKey);
        throw err;
      }
      if (!chat.stream) {
        const completion = await deps.completions.complete(admission, controller.signal, request.arrivedAt);
        record.answered(completion);
        return completion;
      }
      const final = await sendStream(reply, frameOf(admission.id, admission.created, chat),
        deps.completions.stream(admission, controller.signal, request.arrivedAt));
      if (final?.type === 'error') request.log.warn({ err: final.error.cause, code: final.error.code }, `stream ended early: ${final.error.message}`);
      record.answered(final?.completion ?? null, final?.type === 'error' ? final.error : null);
      return reply;
    } finally {
      inFlight -= 1;
    }
  }
}

/**
 * Aborts when the client goes away before its answer is complete. Watched from
 * the handler's first line, and a connection already gone (while authentication
 * waited on the database) counts too: a client that left is never served or charged.
 */
function watchClient(reply: FastifyReply): AbortController {
  const controller = new AbortController();
  const res = reply.raw;
  const gone = () => {
    if (!res.writableFinished) controller.abort();
  };
  if (res.destroyed || res.socket === null || res.socket.destroyed) gone();
  else res.on('close', gone);
  return controller;
}

/** The answer to a request whose Idempotency-Key was already used: a 409, or the first response again. */
async function answerClaim(
  claim: Exclude<IdempotencyClaim, { state: 'claimed' }>, chat: ChatRequest, reply: FastifyReply, record: CompletionRecord,
): Promise<unknown> {
  switch (claim.state) {
    case 'mismatch': throw errors.idempotencyConflict('This Idempotency-Key was used with a different request body.');
    case 'running': throw errors.idempotencyConflict('The first request with this Idempotency-Key is still running.');
    case 'interrupted':
      throw errors.idempotencyConflict('The first request with this Idempotency-Key was charged for what it delivered before it was interrupted; it is not run again.');
    case 'done': {
      const stored = claim.response.body as StoredCompletion;
      reply.header('idempotent-replayed', 'true');
      record.answered(stored, null, true);
      if (!chat.stream) return stored;
      await sendStream(reply, frameOf(stored.id, stored.created, chat), replay(stored));
      return reply;
    }
  }
}

/** A stored completion, told again as the stream it was, its error included. */
async function* replay(stored: StoredCompletion): AsyncGenerator<StreamOutput> {
  const { error, ...completion } = stored;
  const message = completion.choices[0]?.message;
  if (message?.content) yield { type: 'delta', content: message.content };
  const calls = message && 'tool_calls' in message ? message.tool_calls : [];
  for (const [index, call] of calls.entries()) {
    yield { type: 'tool_call', index, id: call.id, name: call.function.name, arguments: call.function.arguments };
  }
  if (!error) return yield { type: 'end', completion };
  yield { type: 'error', completion, error: new GatewayError({ status: 502, type: 'upstream_error', code: error.code, message: error.message }) };
}

function frameOf(id: string, created: number, chat: ChatRequest) {
  return { id, created, model: chat.model, includeUsage: chat.includeUsage };
}

/** Applies the gateway's defaults and flattens content parts to text. */
export function toChatRequest(body: ChatCompletionBody): ChatRequest {
  const messages: ChatMessage[] = body.messages.map((m) => ({
    role: m.role === 'developer' ? 'system' : m.role,
    content: typeof m.content === 'string' ? m.content : (m.content ?? []).map((part) => part.text).join(''),
    ...(m.name !== undefined ? { name: m.name } : {}),
    ...(m.tool_call_id !== undefined ? { toolCallId: m.tool_call_id } : {}),
    ...(m.tool_calls ? { toolCalls: m.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
  }));
  const stop = body.stop ?? undefined;
  return {
    model: body.model,
    messages,
    maxTokens: body.max_tokens ?? body.max_completion_tokens ?? null,
    temperature: body.temperature ?? 0.7,
    topP: body.top_p ?? 1.0,
    callerSet: { temperature: body.temperature != null, topP: body.top_p != null },
    stream: body.stream ?? false,
    includeUsage: body.stream_options?.include_usage ?? false,
    stop: stop === undefined ? undefined : typeof stop === 'string' ? [stop] : stop,
    seed: body.seed ?? undefined,
    presencePenalty: body.presence_penalty ?? undefined,
    frequencyPenalty: body.frequency_penalty ?? undefined,
    user: body.user ?? undefined,
    responseFormat: body.response_format ?? undefined,
    // tool_choice and parallel_tool_calls without tools mean nothing to an upstream (OpenAI refuses them): sent only with tools.
    ...(body.tools && body.tools.length > 0 && {
      tools: body.tools,
      toolChoice: body.tool_choice ?? undefined,
      parallelToolCalls: body.parallel_tool_calls ?? undefined,
    }),
  };
}

const MAX_IDEMPOTENCY_KEY = 255;

/** The Idempotency-Key header, or null; one that cannot be honoured is refused, never ignored. */
function idempotencyKeyOf(request: FastifyRequest): string | null {
  const value = request.headers['idempotency-key'];
  if (value === undefined) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_IDEMPOTENCY_KEY) {
    throw errors.invalidValue('Idempotency-Key', `The Idempotency-Key header must be 1 to ${MAX_IDEMPOTENCY_KEY} characters, sent once.`);
  }
  return value;
}

function fingerprint(body: unknown): string {
  return createHash('sha256').update(JSON.stringify(body)).digest('hex');
}
