/**
 * Anthropic's usage as the gateway's. Anthropic counts the prompt in three
 * parts: `input_tokens` (after the last cache breakpoint), tokens written to
 * the cache and tokens read from it; the prompt is their sum, and the tokens
 * read from the cache are its `cachedTokens`.
 *
 * In a stream, `message_start` reports the input side and `message_delta` the
 * output side, and every report is cumulative: the last value of each field
 * wins, nothing is added.
 */
import { isCount, isRecord } from '../http.js';
import type { TokenUsage } from '../types.js';

const FIELDS = ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const;

/** The counts reported so far, by Anthropic's field names. */
export type UsageCounts = Partial<Record<(typeof FIELDS)[number], number>>;

/** Takes in one usage report: each count it carries replaces the one before. */
export function mergeUsage(counts: UsageCounts, report: unknown): UsageCounts {
  if (!isRecord(report)) return counts;
  for (const field of FIELDS) {
    const value = report[field];
    if (isCount(value)) counts[field] = value;
  }
  return counts;
}

/** The usage, or null when input or output tokens were never reported. */
export function toTokenUsage(counts: UsageCounts): TokenUsage | null {
  const { input_tokens: input, output_tokens: output } = counts;
  if (input === undefined || output === undefined) return null;
  const written = counts.cache_creation_input_tokens ?? 0;
  const read = counts.cache_read_input_tokens;
  return {
    promptTokens: input + written + (read ?? 0),
    completionTokens: output,
    ...(read !== undefined && { cachedTokens: read }),
  };
}
