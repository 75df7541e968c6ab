/**
 * Unit tests of the models: plain TypeScript through ts-jest, no DOM and no
 * JupyterLab runtime (the models depend on @lumino/signaling only).
 */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  testRegex: 'src/.*/.*\\.spec\\.ts$',
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
