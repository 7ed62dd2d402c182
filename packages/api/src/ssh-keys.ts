import Type from 'typebox';
import { Timestamp, Uuid } from './common.js';

export const SshKey = Type.Object({
  id: Uuid,
  label: Type.String(),
  public_key: Type.String({ description: 'OpenSSH public key line' }),
  fingerprint: Type.String({ description: 'SHA256:<base64> fingerprint' }),
  key_type: Type.String({ description: 'e.g. ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256' }),
  created_at: Timestamp,
});

export const AddSshKeyRequest = Type.Object(
  {
    public_key: Type.String({ minLength: 1, maxLength: 16384 }),
    label: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);

export const GenerateSshKeyRequest = Type.Object(
  { label: Type.Optional(Type.String({ maxLength: 100 })) },
  { additionalProperties: false },
);

export const GeneratedSshKey = Type.Intersect([
  SshKey,
  Type.Object({
    private_key: Type.String({ description: 'OpenSSH private key; returned once, never stored' }),
  }),
]);

export const SshKeyList = Type.Object({ keys: Type.Array(SshKey) });

export type SshKey = Type.Static<typeof SshKey>;
export type GeneratedSshKey = Type.Static<typeof GeneratedSshKey>;
