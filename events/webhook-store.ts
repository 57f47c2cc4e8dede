import { randomBytes } from 'node:crypto';
import type { Sequelize, Transaction } from 'sequelize';
import type { Config } from '../core/config.js';
import { NotFound } from '../core/errors.js';
import { sqlRows } from '../core/sql.js';
import { ResponseCipher } from '../idempotency/response-cipher.js';

/**
 * Webhook endpoints and their deliveries (CONTRACT section 12): the rows, as the API shows them.
 * The tables are models/migrations/20261127000001-events-outbox.cjs's; event_emit fans a new event out
 * to every ENABLED matching endpoint in the event's transaction.
 */

/** An Endpoint without its secret (the secret is only in the create's first answer). */
export interface EndpointDto {
  id: string;
  url: string;
  /** null: every type, also types added later. */
  types: string[] | null;
  status: 'ENABLED';
  createdAt: string;
}

export interface DeliveryDto {
  id: string;
  eventId: string;
  type: string;
  status: 'PENDING' | 'SUCCEEDED' | 'FAILED';
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
}

interface EndpointRow {
  id: string;
  url: string;
  types: string[] | null;
  status: string;
  created_at: Date;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  type: string;
  status: DeliveryDto['status'];
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date) => new Date(d).toISOString();

export const toEndpointDto = (r: EndpointRow): EndpointDto => ({
  id: r.id,
  url: r.url,
  types: r.types,
  status: 'ENABLED',
  createdAt: iso(r.created_at),
});

const toDeliveryDto = (r: DeliveryRow): DeliveryDto => ({
  id: String(r.id),
  eventId: r.event_id,
  type: r.type,
  status: r.status,
  attempts: r.attempts,
  lastStatusCode: r.last_status_code,
  lastError: r.last_error,
  nextAttemptAt: r.next_attempt_at === null ? null : iso(r.next_attempt_at),
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
});

/**
 * The secret is stored encrypted with the key that encrypts stored responses (RESPONSE_ENCRYPTION_KEY,
 * AES-256-GCM; previous keys still decrypt after a rotation), bound to its endpoint by the associated
 * data: a ciphertext copied onto another endpoint's row does not decrypt.
 */
export class SecretBox {
  private readonly cipher: ResponseCipher;

  constructor(
    config: Pick<
      Config,
      'RESPONSE_ENCRYPTION_KEY_ID' | 'RESPONSE_ENCRYPTION_KEY' | 'RESPONSE_ENCRYPTION_PREVIOUS_KEYS'
    >,
  ) {
    const previous = Object.fromEntries(
      (config.RESPONSE_ENCRYPTION_PREVIOUS_KEYS ?? '')
        .split(',')
        .filter(Boolean)
        .map((pair) => [pair.split(':')[0], Buffer.from(pair.split(':')[1], 'base64')]),
    );
    this.cipher = new ResponseCipher(
      config.RESPONSE_ENCRYPTION_KEY_ID,
      config.RESPONSE_ENCRYPTION_KEY,
      previous,
    );
  }

  seal(endpointId: string, secret: string): string {
    return this.cipher.encrypt(secret, `webhook-endpoint:${endpointId}`);
  }

  open(endpointId: string, stored: string): string {
    return this.cipher.decrypt(stored, `webhook-endpoint:${endpointId}`);
  }
}

export const newEndpointId = () => `we_${randomBytes(12).toString('hex')}`;

const ENDPOINT_COLUMNS = 'id, url, types, status, created_at';

export async function insertEndpoint(
  sequelize: Sequelize,
  tx: Transaction,
  row: { id: string; tenantId: string; url: string; types: string[] | null; secretCiphertext: string },
): Promise<EndpointDto> {
  const rows = await sqlRows<EndpointRow>(
    sequelize,
    `INSERT INTO webhook_endpoints (id, tenant_id, url, types, secret_ciphertext)
     VALUES ($1, $2, $3, $4::text[], $5) RETURNING ${ENDPOINT_COLUMNS}`,
    [row.id, row.tenantId, row.url, row.types, row.secretCiphertext],
    tx,
  );
  return toEndpointDto(rows[0]);
}

export async function listEndpoints(sequelize: Sequelize, tenantId: string): Promise<EndpointDto[]> {
  const rows = await sqlRows<EndpointRow>(
    sequelize,
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 AND status = 'ENABLED'
      ORDER BY created_at, id`,
    [tenantId],
  );
  return rows.map(toEndpointDto);
}

/** The tenant's ENABLED endpoint, or 404 (another tenant's, a deleted one and none look the same). */
export async function getEndpoint(sequelize: Sequelize, tenantId: string, id: string): Promise<EndpointDto> {
  const rows = await sqlRows<EndpointRow>(
    sequelize,
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2 AND status = 'ENABLED'`,
    [id, tenantId],
  );
  if (!rows[0]) throw new NotFound('Webhook endpoint not found');
  return toEndpointDto(rows[0]);
}

/**
 * Marks the endpoint DELETED and ends its PENDING deliveries (FAILED, "endpoint deleted") in one
 * transaction: event_emit adds none for it afterwards, and the dispatcher claims none (it skips what
 * is not PENDING, and checks the endpoint again). A delivery claimed before this commit may still be
 * in flight; its result write is refused (its row is no longer PENDING).
 */
export async function deleteEndpoint(
  sequelize: Sequelize,
  tx: Transaction,
  tenantId: string,
  id: string,
): Promise<void> {
  const rows = await sqlRows<{ id: string }>(
    sequelize,
    `UPDATE webhook_endpoints SET status = 'DELETED', deleted_at = now()
      WHERE id = $1 AND tenant_id = $2 AND status = 'ENABLED' RETURNING id`,
    [id, tenantId],
    tx,
  );
  if (!rows[0]) throw new NotFound('Webhook endpoint not found');
  await sqlRows(
    sequelize,
    `UPDATE webhook_deliveries SET status = 'FAILED', last_error = 'endpoint deleted', next_attempt_at = NULL,
            lease_owner = NULL, lease_until = NULL, updated_at = now()
      WHERE endpoint_id = $1 AND status = 'PENDING'`,
    [id],
    tx,
  );
}

/** The endpoint's deliveries, newest first (404 for an endpoint the tenant does not have). */
export async function listDeliveries(
  sequelize: Sequelize,
  tenantId: string,
  endpointId: string,
  page: number,
  size: number,
): Promise<DeliveryDto[]> {
  await getEndpoint(sequelize, tenantId, endpointId);
  const rows = await sqlRows<DeliveryRow>(
    sequelize,
    `SELECT id, event_id, type, status, attempts, last_status_code, last_error, next_attempt_at, created_at, updated_at
       FROM webhook_deliveries WHERE endpoint_id = $1 AND tenant_id = $2
      ORDER BY id DESC LIMIT $3 OFFSET $4`,
    [endpointId, tenantId, size, (page - 1) * size],
  );
  return rows.map(toDeliveryDto);
}
