import assert from 'node:assert/strict';
import type { TestGateway } from './test-gateway.js';

type Response = Awaited<ReturnType<TestGateway['request']>>;

/** Asserts the status and the `{error, code, details?}` body every error answers with; returns the body. */
export function assertError(response: Response, status: number, code: string): any {
  assert.equal(
    response.status,
    status,
    `expected ${status} ${code}, got ${response.status} ${JSON.stringify(response.body)}`,
  );
  assert.match(String(response.headers['content-type']), /^application\/json/);
  assert.equal(response.body.code, code, JSON.stringify(response.body));
  assert.equal(typeof response.body.error, 'string');
  assert.ok(response.body.error.length > 0);
  return response.body;
}

/** Asserts a 400 validation_failed whose details name exactly these fields (in any order). */
export function assertValidation(response: Response, fields: string[]): void {
  const body = assertError(response, 400, 'validation_failed');
  assert.ok(Array.isArray(body.details), JSON.stringify(body));
  for (const detail of body.details) {
    assert.equal(typeof detail.field, 'string');
    assert.equal(typeof detail.message, 'string');
  }
  assert.deepEqual(
    [...new Set(body.details.map((d: any) => d.field))].sort(),
    [...fields].sort(),
    JSON.stringify(body),
  );
}

/** The event log rows matching a filter (admin token), newest first. */
export async function eventsOf(t: TestGateway, filter: { user_id?: string; type?: string }): Promise<any[]> {
  const query = new URLSearchParams({ limit: '500', ...filter });
  const response = await t.request('GET', `/v1/admin/events?${query}`, { token: t.adminToken });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.events;
}

/** Asserts exactly `count` events of this type for the user, all with the given actor; returns the newest. */
export async function assertEvent(
  t: TestGateway,
  filter: { user_id: string; type: string },
  actor: { kind: string; id: string | null; username: string | null },
  count = 1,
): Promise<any> {
  const events = await eventsOf(t, filter);
  assert.equal(events.length, count, `${filter.type}: ${JSON.stringify(events)}`);
  for (const event of events) {
    assert.equal(event.type, filter.type);
    assert.equal(event.user_id, filter.user_id);
    assert.deepEqual(event.actor, actor);
    assert.match(event.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  }
  return events[0];
}

export const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
