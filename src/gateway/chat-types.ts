/** The gateway's own view of a chat request and the OpenAI-shaped objects it answers with. */
import type { ChatCompletion } from '../http/schemas/chat-completion-response.js';
import type { ErrorBody } from '../http/schemas/error.js';
import type { ChatMessage } from '../providers/types.js';

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

// The answers' shapes are the API document's schemas: one definition, for the types and the document.
export type { AssistantMessage, ChatCompletion, ChatUsage, Svc, WireToolCall } from '../http/schemas/chat-completion-response.js';

/** A completion as kept under an Idempotency-Key; a stream that failed midway keeps the error that ended it. */
export type StoredCompletion = ChatCompletion & { error?: ErrorBody['error'] };
