/**
 * The one place where failures become HTTP: every error leaves as the OpenAI
 * error body with its status. Also body parsing and validation, so that a bad
 * body is always the same 400.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { errors, GatewayError } from '../errors.js';
import { newId } from '../ids.js';
import { scrubSecrets } from '../keys/secret.js';
import { findDeepNesting, MAX_BODY_DEPTH } from './json-bounds.js';

export const BODY_LIMIT_BYTES = 8 * 1024 * 1024;

export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const fastifyError = err as Partial<FastifyError>;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': return errors.requestTooLarge();
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return errors.invalidJson();
  }
  if (typeof fastifyError.statusCode === 'number' && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return errors.invalidValue(null, 'The request could not be read.');
  }
  return errors.internal(err);
}

export function sendError(reply: FastifyReply, error: GatewayError): FastifyReply {
  return reply.status(error.status).headers(error.headers).send(error.toBody(reply.request.id));
}

/** `onError` sees every error answered through the handler (refusals are counted there). */
export function installErrorHandling(app: FastifyInstance, onError?: (error: GatewayError) => void): void {
  app.setErrorHandler((err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    if (reply.raw.destroyed) {
      request.log.info('the client went away before the answer');
      return reply;
    }
    const error = toGatewayError(err);
    onError?.(error);
    if (error.status >= 500) request.log.error({ err: error.cause ?? err, code: error.code }, error.message);
    else request.log.info({ code: error.code }, error.message);
    return sendError(reply, error);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, errors.notFound(`Unknown path: ${request.method} ${scrubSecrets(request.url.split('?')[0] ?? '')}.`)));
  // Requests Node's HTTP parser refuses (headers too large, bytes that are not HTTP) never reach
  // Fastify's error handler; Fastify's own answer to them is not the OpenAI error body.
  app.server.removeAllListeners('clientError');
  app.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket));
  // Node hands a CONNECT request to 'connect' listeners and, with none, drops the socket unanswered.
  app.server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    writeRawError(socket, errors.methodNotAllowed('CONNECT', scrubSecrets(req.url ?? '')));
    socket.destroy();
  });
  // Node's own refusal of an HTTP/1.1 request without Host (requireHostHeader) is a bare 400; this one has the body.
  app.addHook('onRequest', async (request) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw errors.invalidValue('Host', 'An HTTP/1.1 request must carry a Host header.');
    }
  });

  // Every body is read as JSON whatever its content type claims, so a bad one is always invalid_json.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT_BYTES }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    const tooDeep = nestingError(text);
    if (tooDeep) return done(tooDeep, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(errors.invalidJson('The request body is not valid JSON.'), undefined);
    }
  });
}

/**
 * Any body nested deeper than MAX_BODY_DEPTH is refused before it is parsed, so that
 * nothing downstream (JSON.stringify of the body or of its tools) can overflow the
 * stack. Under an object's field: invalid_value naming the field; else not an object.
 */
function nestingError(text: string): GatewayError | null {
  const deep = findDeepNesting(text, MAX_BODY_DEPTH);
  if (!deep) return null;
  if (deep.key === null) return errors.invalidJson();
  const limit = `nested more than ${MAX_BODY_DEPTH} levels deep (the most any part of a request body may nest).`;
  // A field name is echoed only when it is short enough to be one.
  if (deep.key.length > 128) return errors.invalidValue(null, `The request body is ${limit}`);
  const param = scrubSecrets(deep.key);
  return errors.invalidValue(param, `${param}: ${limit}`);
}

/** The raw answer to a request that could not be parsed as HTTP, in the one error body. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const error = err.code === 'HPE_HEADER_OVERFLOW'
    ? new GatewayError({ status: 431, type: 'invalid_request_error', code: 'request_too_large', message: 'The request headers are too large.' })
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new GatewayError({ status: 408, type: 'invalid_request_error', code: 'request_timeout', message: 'The request took too long to arrive.' })
      : errors.invalidValue(null, 'The request could not be read as HTTP.');
  writeRawError(socket, error);
  socket.destroy(err);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that only answers 405 (see allowOnly): not an endpoint of the API document. */
    methodNotAllowed?: boolean;
  }
}

/** Writes `error` as a whole HTTP answer on a socket Fastify does not own, closing the connection after it. */
function writeRawError(socket: Duplex, error: GatewayError): void {
  if (!socket.writable) return;
  const body = JSON.stringify(error.toBody());
  socket.write(`HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? 'Error'}\r\n` +
    `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `x-request-id: ${newId('req')}\r\nConnection: close\r\n\r\n${body}`);
}

/** Answers 405 for the methods a path does not take (404 stays for paths that do not exist). */
export function allowOnly(app: FastifyInstance, path: string, allowed: string[]): void {
  const others = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !allowed.includes(m));
  app.route({
    method: others,
    url: path,
    config: { methodNotAllowed: true },
    handler: async (request) => { throw errors.methodNotAllowed(request.method, request.url.split('?')[0] ?? path); },
  });
}

/**
 * Validates a JSON body against its schema: not an object → invalid_json; a bad
 * field → invalid_value naming it (`messages[2].role`). `undefined` means no body.
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown, emptyAs?: unknown): z.infer<T> {
  const value = body === undefined ? emptyAs : body;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw errors.invalidJson();
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = formatParam(issue.path);
  throw errors.invalidValue(param || null, param ? `${param}: ${issue.message}` : issue.message);
}

/** Validates a query string against its schema; a bad parameter → invalid_value naming it, in the schema's words. */
export function parseQuery<T extends z.ZodType>(schema: T, query: unknown): z.infer<T> {
  const result = schema.safeParse(query ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = formatParam(issue.path);
  throw errors.invalidValue(param || null, issue.message);
}

function formatParam(path: PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
}
