/** The gateway's own view of a chat request and the OpenAI-shaped objects it answers with. */
import type { ChatMessage, FinishReason } from '../providers/types.js';
import type { AutoChoice } from './router.js';

/** A validated request with the gateway's defaults applied. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** The caller's `max_tokens` / `max_completion_tokens`, or null. */
  maxTokens: number | null;
  temperature: number;
  topP: number;
  /** Which of temperature and top_p the caller set (the others hold the gateway's defaults). */
  callerSet: { temperature: boolean; topP: boolean };
  stream: boolean;
  includeUsage: boolean;
  stop?: string[];
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  user?: string;
  responseFormat?: Record<string, unknown>;
  tools?: Array<Record<string, unknown>>;
  toolChoice?: string | Record<string, unknown>;
  parallelToolCalls?: boolean;
}

export interface Svc {
  requested_model: string;
  routed_model: string;
  credits_used: number;
  balance_remaining: number;
  latency_ms: number;
  provider: string;
  auto?: AutoChoice;
  /** Every route that contributed, in order, when an answer that broke off was continued on another. */
  routes?: Array<{ provider: string; model: string }>;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

export interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type AssistantMessage =
  | { role: 'assistant'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls: WireToolCall[] };

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{ index: number; message: AssistantMessage; finish_reason: FinishReason }>;
  usage: ChatUsage;
  svc: Svc;
}

/** A completion as kept under an Idempotency-Key; a stream that failed midway keeps the error that ended it. */
export type StoredCompletion = ChatCompletion & { error?: { message: string; type: string; code: string; param: string | null } };
