import react from '@vitejs/plugin-react';
import { defaultClientConditions, defineConfig } from 'vite';

/** The dev server (npm run dev) on 2568, forwarding the API to a gateway started on 8090. */
const api = process.env.DASHBOARD_DEV_API ?? 'http://127.0.0.1:8090';

export default defineConfig({
  plugins: [react()],
  resolve: { conditions: ['source', ...defaultClientConditions] },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  server: {
    port: 2568,
    strictPort: true,
    // ws: the desktop's stream (noVNC) goes through the same proxy.
    proxy: { '/v1': { target: api, ws: true }, '/healthz': api, '/entry': api },
  },
});
