import Type from 'typebox';
import { Timestamp, Uuid } from './common.js';

export const Role = Type.Union([Type.Literal('admin'), Type.Literal('user')]);

export const LoginRequest = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 200 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

export const LoginResponse = Type.Object({
  token: Type.String({ description: 'JWT (HS256) to send as `Authorization: Bearer <token>`' }),
  role: Role,
  expires_at: Timestamp,
  user: Type.Object({ id: Uuid, username: Type.String(), role: Role }),
});

export type Role = Type.Static<typeof Role>;
export type LoginRequest = Type.Static<typeof LoginRequest>;
export type LoginResponse = Type.Static<typeof LoginResponse>;
