/**
 * Gemini's `usageMetadata` as the gateway's usage. `promptTokenCount` already
 * holds the cached tokens (`cachedContentTokenCount`, reported as
 * `cachedTokens`, never added). Thoughts are output the caller pays for, so the
 * completion is `candidatesTokenCount + thoughtsTokenCount` (the thoughts also
 * reported as `reasoningTokens`). `toolUsePromptTokenCount` (what a built-in tool
 * read; the gateway enables none) is prompt. Counts Gemini leaves out are 0;
 * without `promptTokenCount` there is no usage.
 */
import { isCount, isRecord } from '../http.js';
import type { TokenUsage } from '../types.js';

export function toUsage(metadata: unknown): TokenUsage | null {
  if (!isRecord(metadata) || !isCount(metadata.promptTokenCount)) return null;
  const count = (value: unknown): number => (isCount(value) ? value : 0);
  const { cachedContentTokenCount: cached, thoughtsTokenCount: thoughts } = metadata;
  return {
    promptTokens: metadata.promptTokenCount + count(metadata.toolUsePromptTokenCount),
    completionTokens: count(metadata.candidatesTokenCount) + count(thoughts),
    ...(isCount(cached) && { cachedTokens: cached }),
    ...(isCount(thoughts) && { reasoningTokens: thoughts }),
  };
}
