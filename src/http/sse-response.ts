/**
 * Writes a completion's stream as the contract's SSE: `chat.completion.chunk`
 * objects, `: ping` comments while the upstream is silent, the finish chunk
 * with `usage` and `svc`, then `[DONE]`. Headers go out only when the first
 * thing to send does, so a failure before that is still a plain HTTP error.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { GatewayError } from '../errors.js';
import type { StreamOutput } from '../gateway/completion.js';
import { encodeSseComment, encodeSseData, SSE_DONE } from '../providers/sse.js';
import { toGatewayError } from './errors.js';

export interface StreamFrame {
  id: string;
  created: number;
  model: string;
  includeUsage: boolean;
}

type FinalOutput = Extract<StreamOutput, { type: 'end' | 'error' }>;

/** Sends `outputs` to the client; returns the last output (the settled completion, and its error if cut), or null if nothing was settled. */
export async function sendStream(reply: FastifyReply, frame: StreamFrame, outputs: AsyncGenerator<StreamOutput>): Promise<FinalOutput | null> {
  const res = reply.raw;
  let started = false;
  let sentRole = false;
  const start = () => {
    if (started) return;
    reply.hijack();
    res.writeHead(200, {
      ...(reply.getHeaders() as OutgoingHttpHeaders),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': reply.request.id,
    });
    started = true;
  };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null, extra: Record<string, unknown> = {}) => ({
    id: frame.id, object: 'chat.completion.chunk', created: frame.created, model: frame.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra,
  });

  try {
    for await (const out of outputs) {
      start();
      switch (out.type) {
        case 'ping':
          await write(res, encodeSseComment('ping'));
          break;
        case 'delta':
          await write(res, encodeSseData(chunk(sentRole ? { content: out.content } : { role: 'assistant', content: out.content }, null)));
          sentRole = true;
          break;
        case 'tool_call': {
          const call = {
            index: out.index,
            ...(out.id !== undefined && { id: out.id, type: 'function' }),
            function: { ...(out.name !== undefined && { name: out.name }), arguments: out.arguments },
          };
          await write(res, encodeSseData(chunk(sentRole ? { tool_calls: [call] } : { role: 'assistant', content: null, tool_calls: [call] }, null)));
          sentRole = true;
          break;
        }
        case 'end': {
          const { usage, svc, choices } = out.completion;
          let text = encodeSseData(chunk(sentRole ? {} : { role: 'assistant', content: '' }, choices[0]!.finish_reason, { usage, svc }));
          if (frame.includeUsage) text += encodeSseData({ ...chunk({}, null), choices: [], usage, svc });
          await write(res, text + SSE_DONE);
          res.end();
          return out;
        }
        case 'error':
          await endWithError(res, out.error, reply.request.id, { usage: out.completion.usage, svc: out.completion.svc });
          return out;
      }
    }
    return null;
  } catch (err) {
    if (!started) throw err;
    if (!res.destroyed) await endWithError(res, toGatewayError(err), reply.request.id, {});
    return null;
  }
}

async function endWithError(res: ServerResponse, error: GatewayError, requestId: string, extra: Record<string, unknown>): Promise<void> {
  await write(res, encodeSseData({ ...error.toBody(requestId), ...extra }) + SSE_DONE);
  res.end();
}

/** A client that reads nothing for this long is cut off: it must not hold credits and an upstream forever. */
const DRAIN_TIMEOUT_MS = 30_000;

/** Writes with backpressure; resolves at once if the client is gone, and drops a client that stopped reading. */
function write(res: ServerResponse, text: string): Promise<void> {
  if (res.destroyed || res.writableEnded) return Promise.resolve();
  if (res.write(text)) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => res.destroy(), DRAIN_TIMEOUT_MS);
    const done = () => {
      clearTimeout(timer);
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
