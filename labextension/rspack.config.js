// Extra build steps for `jupyter-builder`: the files of static/ (the OAuth callback page and its
// script) are copied as they are into the built extension's static/ folder, which JupyterLab
// serves without login at <baseUrl>lab/extensions/jupyter_fsbroker/static/.
const { rspack } = require('@rspack/core');

module.exports = {
  plugins: [
    new rspack.CopyRspackPlugin({
      patterns: [{ from: 'static', to: '.' }]
    })
  ]
};
