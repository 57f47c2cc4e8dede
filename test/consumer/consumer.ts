// Another service's code, importing the clients the way it would: by the package's `exports`
// ("idempotent-service/client"). Checked by `npx tsc -p test/consumer` in CI: the calls below must
// type-check against the service's router and OpenAPI document.
import {
  createServiceClient,
  newIdempotencyKey,
  RetriesExhaustedError,
  StillProcessingError,
  waitForExport,
} from 'idempotent-service/client';

export async function payOrder(url: string, token: string, merchantOrderNo: string): Promise<string> {
  const { trpc, rest } = createServiceClient({ url, token, retry: { deadlineMs: 20000 } });
  const order = await rest.POST('/api/v1/orders', {
    params: { header: { 'Idempotency-Key': newIdempotencyKey() } },
    body: { merchantOrderNo, amount: '10.50' },
  });
  if (order.error) return `order refused: ${order.error.code} ${order.error.message}`;
  try {
    const paid = await trpc.payments.create.mutate({ merchantOrderNo, amount: '10.50' });
    return 'id' in paid.data ? `paid: ${paid.data.status}` : 'still processing';
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof StillProcessingError) return `resume later with key ${cause.idempotencyKey}`;
    if (cause instanceof RetriesExhaustedError) return `unavailable (${cause.lastStatus})`;
    throw err;
  }
}

/** An export through tRPC and the wait for it, as client/index.ts's header shows it. */
export async function exportOrders(url: string, token: string): Promise<string> {
  const { trpc } = createServiceClient({ url, token });
  const { data } = await trpc.exports.create.mutate({ resource: 'orders' });
  // The task's id: `resourceId` of the 202 (null while not known yet), or `id` where the answer's type is the export.
  const id = 'resourceId' in data ? data.resourceId : data.id;
  if (!id) return 'its id is not known yet: call again with the same key';
  const done = await waitForExport(trpc, id);
  return `${done.status}: GET /api/v1/exports/${done.id}/file`;
}
