import type { OrderEvent } from './model.js';
import { isStaff, type User } from './policy.js';

/** Receives every event once its transaction has committed. */
export type EventSink = (event: OrderEvent) => void;

/** The same rule as reading the order: staff see every event, a customer those of their orders. */
export function canSeeEvent(user: User, ownCustomerId: string | null, event: OrderEvent): boolean {
  return isStaff(user) || event.order.customerId === ownCustomerId;
}
