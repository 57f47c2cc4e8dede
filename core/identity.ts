export type Role = 'admin' | 'user';

/** Who is acting: the verified claims of a bearer token (the user row's role wins when there is one). */
export interface Identity {
  userId: string;
  tenantId: string;
  role: Role;
}
