// The baseline: a bare Fastify app (the gateway's Fastify) answering the benchmarked routes with a
// constant, so the gap to the gateway is the cost of auth, validation, the database and serialisation.
import Fastify from 'fastify';

const app = Fastify({ logger: false });
const hello = async () => ({ hello: 'world' });
app.get('/v1/admin/users', hello);
app.post('/v1/auth/login', hello);

const port = Number(process.env.HTTP_PORT);
await app.listen({ host: '127.0.0.1', port });
process.stdout.write(`ready fastify ${app.version}\n`);
process.once('SIGTERM', () => {
  app.close().then(() => process.exit(0));
});
