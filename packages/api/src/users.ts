import Type from 'typebox';
import { Role } from './auth.js';
import { NullableTimestamp, Timestamp, UserShortId, Uuid } from './common.js';

export const USERNAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{2,49}$';

export const Username = Type.String({
  minLength: 3,
  maxLength: 50,
  pattern: USERNAME_PATTERN,
  description: '3 to 50 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit',
});

export const Password = Type.String({ minLength: 8, maxLength: 1024, description: 'At least 8 characters' });

export const UserStatus = Type.Union([Type.Literal('active'), Type.Literal('disabled')]);

export const User = Type.Object({
  id: Uuid,
  username: Type.String(),
  role: Role,
  status: UserStatus,
  expired: Type.Boolean({ description: 'true when expires_at has passed' }),
  expires_at: NullableTimestamp,
  short_id: UserShortId,
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const SshCredentials = Type.Object({
  ssh_user: Type.String({ description: 'User-level SSH login name' }),
  ssh_pass: Type.String({ description: 'User-level SSH password (letters and digits)' }),
});

export const CreateUserRequest = Type.Object(
  { username: Username, password: Password, expires_at: Type.Optional(NullableTimestamp) },
  { additionalProperties: false },
);

export const CreatedUser = Type.Intersect([User, Type.Object({ ssh_credentials: SshCredentials })]);

export const UserList = Type.Object({ users: Type.Array(User) });

export const PatchUserRequest = Type.Object({ status: UserStatus }, { additionalProperties: false });

export const ExpiryRequest = Type.Object({ expires_at: NullableTimestamp }, { additionalProperties: false });

export const RotatedPassword = Type.Object({
  new_password: Type.String({ description: '20 generated letters and digits, shown once' }),
});

export const ChangePasswordRequest = Type.Object(
  { old_password: Type.String({ minLength: 1, maxLength: 1024 }), new_password: Password },
  { additionalProperties: false },
);

export type User = Type.Static<typeof User>;
export type SshCredentials = Type.Static<typeof SshCredentials>;
export type CreateUserRequest = Type.Static<typeof CreateUserRequest>;
export type CreatedUser = Type.Static<typeof CreatedUser>;
export type UserStatus = Type.Static<typeof UserStatus>;
