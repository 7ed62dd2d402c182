/** The settings the HTTP layer reads itself (config.ts composes them into the gateway's Config). */
export interface HttpSettings {
  /** Where clients reach the API (PUBLIC_API_URL): the entry port names it, desktop cookies are Secure if https. */
  publicApiUrl: string;
  /** Addresses or CIDR ranges of reverse proxies whose X-Forwarded-For is believed (TRUST_PROXY); empty: none. */
  trustProxy: string[];
}
