import { createServiceClient } from '../../client/index.js';
import { tokenFor } from './tokens.js';

export interface ReceivedEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/**
 * A fetch that sends every request to the instance `target.url` names at the time of the request, as
 * a balancer in front of instances would: a client built on it reconnects to whichever instance is
 * current (its EventSource's own reconnection included).
 */
export function balancerFetch(target: { url: string }): typeof fetch {
  return (input, init) => {
    const original = new URL(input instanceof Request ? input.url : String(input));
    const to = new URL(target.url);
    original.protocol = to.protocol;
    original.host = to.host;
    return input instanceof Request ? fetch(new Request(original, input), init) : fetch(original, init);
  };
}

/**
 * events.onEvent through the shipped client (httpSubscriptionLink, the `eventsource` EventSource),
 * collecting what arrives; `started` resolves when the stream has started (its position is fixed).
 */
export function subscribe(
  target: { url: string },
  tenantId: string,
  userId: string,
  role: 'admin' | 'user',
  input: { types?: string[]; lastEventId?: string } = {},
) {
  const { trpc } = createServiceClient({
    url: 'http://balancer.invalid',
    token: tokenFor(tenantId, userId, role),
    fetch: balancerFetch(target),
  });
  const received: ReceivedEvent[] = [];
  const states: string[] = [];
  const errors: unknown[] = [];
  let onStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    onStarted = resolve;
  });
  const subscription = trpc.events.onEvent.subscribe(input as never, {
    onStarted: () => onStarted(),
    onData: (tracked) => {
      const event = tracked.data as unknown as ReceivedEvent;
      if (tracked.id !== event.id)
        errors.push(new Error(`tracked id ${tracked.id} is not the event's ${event.id}`));
      received.push(event);
    },
    onError: (err) => errors.push(err),
    onConnectionStateChange: (s) => states.push(s.state),
  });
  return { received, states, errors, started, close: () => subscription.unsubscribe() };
}
