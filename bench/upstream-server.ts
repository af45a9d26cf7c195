/** The bench's mock upstream, in its own process: prints its URL, serves until killed. */
import { startFakeUpstream } from '../test/support/fake-upstream.js';

const upstream = await startFakeUpstream({ reply: 'The quick brown fox jumps over the lazy dog. '.repeat(6).trim() });
// Forget recorded requests so a long run does not grow the heap.
setInterval(() => upstream.reset(), 1000).unref();
process.stdout.write(`${JSON.stringify({ url: upstream.url })}\n`);
process.on('SIGTERM', () => void upstream.close().then(() => process.exit(0)));
