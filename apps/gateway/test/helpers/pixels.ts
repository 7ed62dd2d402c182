/**
 * Run in a browser page (as text: tsx would wrap a function's inner helpers in its own `__name`, which the page
 * does not have, and the tests have no DOM types): decodes a PNG and returns the share of pixels in a colour and
 * the share of near-white ones.
 */
const PIXEL_SHARES = `async (data, rgb) => {
  const image = new Image();
  image.src = 'data:image/png;base64,' + data;
  await image.decode();
  const canvas = document.createElement('canvas');
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext('2d');
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, image.width, image.height).data;
  let colour = 0;
  let light = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    const [r, g, b] = [pixels[i], pixels[i + 1], pixels[i + 2]];
    if (Math.abs(r - rgb[0]) < 6 && Math.abs(g - rgb[1]) < 6 && Math.abs(b - rgb[2]) < 6) colour++;
    if (r > 240 && g > 240 && b > 240) light++;
  }
  return { colour: colour / (pixels.length / 4), light: light / (pixels.length / 4) };
}`;

export interface PixelShares {
  /** Share of pixels within 5 of `rgb` in every channel. */
  colour: number;
  /** Share of near-white pixels. */
  light: number;
}

/** What a structural Playwright page needs: only `evaluate` of an expression. */
interface EvaluatingPage {
  evaluate(expression: string): Promise<unknown>;
}

/** Measures a screenshot in the page that took it (the browser decodes the PNG, so no image library is needed). */
export async function pixelShares(
  page: EvaluatingPage,
  png: Buffer,
  rgb: readonly [number, number, number],
): Promise<PixelShares> {
  const call = `(${PIXEL_SHARES})(${JSON.stringify(png.toString('base64'))}, ${JSON.stringify(rgb)})`;
  return (await page.evaluate(call)) as PixelShares;
}
