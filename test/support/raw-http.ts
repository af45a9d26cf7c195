/**
 * A minimal HTTP/1.1 client over raw `node:net` sockets, for hostile-input
 * tests: it writes the request bytes exactly as given (broken request lines,
 * duplicate or oversized headers, invalid UTF-8, lying Content-Lengths) and
 * reads one response back, keeping the socket alive between requests when the
 * server does. Fetch and undici refuse to send most of what these tests send.
 */
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  /** Header names lower-cased; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: Buffer;
  /** Whether the server closed the connection after this answer. */
  closed: boolean;
}

export interface RawRequest {
  method: string;
  /** The request target as written on the request line (bytes as given, latin1). */
  path: string;
  /** Header lines as [name, value] pairs, in order, duplicates allowed, written as given. */
  headers: Array<[string, string]>;
  body?: Buffer;
  /** When set, replaces the whole head (request line and headers); `headers` and `method` are ignored. */
  rawHead?: Buffer;
}

const CRLF = Buffer.from('\r\n');

/** The request's bytes: its head, a Content-Length if none was given and there is a body, then the body. */
export function encodeRequest(request: RawRequest): Buffer {
  const body = request.body ?? Buffer.alloc(0);
  if (request.rawHead) return Buffer.concat([request.rawHead, body]);
  const lines = [`${request.method} ${request.path} HTTP/1.1`, ...request.headers.map(([k, v]) => `${k}: ${v}`)];
  // HTTP/1.1 requires Host; a request without one is written as raw bytes.
  if (!request.headers.some(([k]) => /^host$/i.test(k))) lines.splice(1, 0, 'host: 127.0.0.1');
  const hasLength = request.headers.some(([k]) => /^(content-length|transfer-encoding)$/i.test(k));
  if (!hasLength && body.length > 0) lines.push(`content-length: ${body.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

/**
 * One keep-alive connection to `port`, reopened when the server closed it.
 * Requests go one at a time; each resolves with the answer, or rejects when the
 * connection ended without one (the caller decides whether that is allowed).
 */
export class RawConnection {
  private socket: Socket | null = null;
  private buffer = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | null = null;

  constructor(private readonly port: number, private readonly timeoutMs = 15_000) {}

  async send(request: RawRequest | Buffer, options: { head?: boolean } = {}): Promise<RawResponse> {
    const socket = await this.open();
    socket.write(Buffer.isBuffer(request) ? request : encodeRequest(request));
    return this.readResponse(options.head ?? (!Buffer.isBuffer(request) && request.method === 'HEAD'));
  }

  /** Opens a fresh socket, for tests that write in pieces themselves. */
  async open(): Promise<Socket> {
    if (this.socket && !this.ended) return this.socket;
    this.buffer = Buffer.alloc(0);
    this.ended = false;
    const socket = connect(this.port, '127.0.0.1');
    this.socket = socket;
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.setNoDelay(true);
    // A socket closed earlier still reports its end: only the current one's events count.
    socket.on('data', (chunk: Buffer) => {
      if (this.socket !== socket) return;
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.notify();
    });
    const end = () => {
      if (this.socket !== socket) return;
      this.ended = true;
      this.notify();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
    return socket;
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** Waits for more bytes or the end; rejects after the timeout. */
  private async more(): Promise<void> {
    if (this.ended) throw new Error(`connection closed before a whole answer (${this.buffer.length} bytes in)`);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  private async take(n: number): Promise<Buffer> {
    while (this.buffer.length < n) await this.more();
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }

  private async line(): Promise<string> {
    for (;;) {
      const at = this.buffer.indexOf(CRLF);
      if (at >= 0) return (await this.take(at + 2)).subarray(0, at).toString('latin1');
      await this.more();
    }
  }

  private async readResponse(head: boolean): Promise<RawResponse> {
    let status: number;
    let headers: Record<string, string>;
    // Interim answers (100 Continue) come first; the answer is the first final one.
    do {
      const statusLine = await this.line();
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
      if (!match) throw new Error(`not an HTTP status line: ${JSON.stringify(statusLine.slice(0, 200))}`);
      status = Number(match[1]);
      headers = {};
      for (let line = await this.line(); line !== ''; line = await this.line()) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
    } while (status < 200);
    let body: Buffer;
    if (head || status === 204 || status === 304) body = Buffer.alloc(0);
    else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = await this.chunked();
    else if (headers['content-length'] !== undefined) body = await this.take(Number(headers['content-length']));
    else {
      while (!this.ended) {
        await this.more().catch((err: unknown) => {
          if (!this.ended) throw err;
        });
      }
      body = this.buffer;
      this.buffer = Buffer.alloc(0);
    }
    const closed = /close/i.test(headers.connection ?? '') || (this.ended && this.buffer.length === 0);
    if (closed) this.close();
    return { status, headers, body, closed };
  }

  private async chunked(): Promise<Buffer> {
    const parts: Buffer[] = [];
    for (;;) {
      const size = parseInt(await this.line(), 16);
      if (!Number.isFinite(size)) throw new Error('bad chunk size');
      if (size === 0) {
        while ((await this.line()) !== '');
        return Buffer.concat(parts);
      }
      parts.push(await this.take(size));
      await this.take(2);
    }
  }
}
