// The part of autocannon's untyped API that bench/api/load.ts uses.
declare module 'autocannon' {
  interface Options {
    url: string;
    method?: 'GET' | 'POST';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    duration?: number;
    overallRate?: number;
    timeout?: number;
  }
  interface Result {
    errors: number;
    timeouts: number;
    non2xx: number;
  }
  interface Instance {
    on(
      event: 'response',
      listener: (client: unknown, statusCode: number, bytes: number, ms: number) => void,
    ): void;
  }
  function autocannon(options: Options, done: (error: Error | null, result: Result) => void): Instance;
  export default autocannon;
}
