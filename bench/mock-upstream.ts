/**
 * The bench's baseline: the least an OpenAI-format upstream can do. It reads
 * the body, answers a fixed reply at once (JSON, or SSE with a usage chunk),
 * and nothing else, so that "direct" measures the load generator and the
 * loopback and "via the gateway" adds exactly the gateway's own work.
 * A model named `slow-stream-N` sends its first chunk at once and the rest
 * after N ms: the shape of thousands of streams held open together.
 * Prints `{"url": …, "pid": …}` and serves until killed.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

const WORDS = 'The quick brown fox jumps over the lazy dog and keeps on running through the field'.split(' ');
const PROMPT_TOKENS = 24;

function completionJson(model: string, maxTokens: number): string {
  const words = WORDS.slice(0, Math.min(WORDS.length, maxTokens));
  return JSON.stringify({
    id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model,
    choices: [{ index: 0, message: { role: 'assistant', content: words.join(' ') }, finish_reason: 'stop' }],
    usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: words.length, total_tokens: PROMPT_TOKENS + words.length },
  });
}

function chunk(model: string, delta: Record<string, unknown>, finish: string | null, usage?: Record<string, number>): string {
  const body: Record<string, unknown> = {
    id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model,
    choices: finish === 'usage' ? [] : [{ index: 0, delta, finish_reason: finish }],
  };
  if (usage) body.usage = usage;
  return `data: ${JSON.stringify(body)}\n\n`;
}

function streamBody(model: string, maxTokens: number): string[] {
  const words = WORDS.slice(0, Math.min(WORDS.length, maxTokens));
  const usage = { prompt_tokens: PROMPT_TOKENS, completion_tokens: words.length, total_tokens: PROMPT_TOKENS + words.length };
  return [
    chunk(model, { role: 'assistant', content: '' }, null),
    ...words.map((w, i) => chunk(model, { content: i === 0 ? w : ` ${w}` }, null)),
    chunk(model, {}, 'stop'),
    chunk(model, {}, 'usage', usage),
    'data: [DONE]\n\n',
  ];
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = JSON.parse(await readBody(req)) as { model?: string; stream?: boolean; max_tokens?: number; max_completion_tokens?: number };
  const model = body.model ?? 'mock';
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? 64;
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(completionJson(model, maxTokens));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const frames = streamBody(model, maxTokens);
  const slow = /^slow-stream-(\d{1,6})$/.exec(model);
  if (!slow) {
    res.end(frames.join(''));
    return;
  }
  res.write(frames.slice(0, 2).join(''));
  const timer = setTimeout(() => res.end(frames.slice(2).join('')), Number(slow[1]));
  res.once('close', () => clearTimeout(timer));
}

const server = createServer((req, res) => {
  handle(req, res).catch(() => {
    if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"bad request","type":"invalid_request_error"}}');
  });
});
server.keepAliveTimeout = 60_000;
server.maxConnections = 20_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}/v1`, pid: process.pid })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
