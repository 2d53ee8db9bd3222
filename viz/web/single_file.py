#!/usr/bin/env python3
"""The page as one file (make web): build-web/hbmlab.html is index.html with hbmlab.js written into it
and hbmlab.wasm gzip'd and base64-encoded into it, so that it opens from disk (file://, no server).
Run: viz/web/single_file.py build-web/index.html build-web/hbmlab.js build-web/hbmlab.wasm build-web/hbmlab.html

A page opened from disk may not fetch its neighbours, so nothing is fetched: the script below hands the
module to Emscripten through Module.instantiateWasm, unpacked by the browser (DecompressionStream);
gzip makes the file a third of the raw wasm's size in base64.
"""
import base64
import gzip
import os
import re
import sys

# Runs before hbmlab.js (index.html's script defines Module and fail). Emscripten calls
# instantiateWasm(imports, receive) instead of fetching hbmlab.wasm; {} says the module comes later.
LOADER = """<script>
  Module.instantiateWasm = function (imports, receive) {
    if (typeof DecompressionStream != 'function') {
      fail('this browser cannot unpack hbmlab.html (no DecompressionStream): Chrome or Edge 80, Firefox 113, Safari 16.4 or newer can');
      return {};
    }
    var text = atob(document.getElementById('hbmlab-wasm-gzip').textContent), bytes = new Uint8Array(text.length);
    for (var k = 0; k < text.length; k++) bytes[k] = text.charCodeAt(k);
    new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer()
      .then(function (wasm) { return WebAssembly.instantiate(wasm, imports); })
      .then(function (r) { receive(r.instance, r.module); })
      .catch(function (e) { fail('could not start the page: ' + e); });
    return {};
  };
</script>
"""


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: single_file.py INDEX_HTML HBMLAB_JS HBMLAB_WASM OUT_HTML")
    index_path, js_path, wasm_path, out_path = sys.argv[1:]
    with open(index_path, encoding="utf-8") as f:
        index = f.read()
    with open(js_path, encoding="utf-8") as f:
        js = f.read()
    with open(wasm_path, "rb") as f:
        wasm = f.read()

    tag = '<script src="hbmlab.js"></script>'
    if index.count(tag) != 1:
        sys.exit(f"single_file.py: {index_path}: expected one {tag}")
    # Inside <script>, "</script" ends the element and "<!--" changes how the rest is parsed.
    for bad in ("</script", "<!--"):
        if bad in js.lower():
            sys.exit(f"single_file.py: {js_path} contains '{bad}', which cannot be written inside <script>")
    packed = base64.b64encode(gzip.compress(wasm, compresslevel=9, mtime=0)).decode("ascii")
    inline = ('<script type="application/octet-stream" id="hbmlab-wasm-gzip">' + packed + "</script>\n"
              + LOADER + "<script>\n" + js + "\n</script>")
    # The comment at the top speaks of the served folder; this file says what it is instead.
    page = re.sub(r"<!--.*?-->", "<!-- hbmlab's page in one file (make web): opens from disk, no server needed. -->",
                  index, count=1, flags=re.S)
    page = page.replace(tag, inline)
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(out_path + ".tmp", out_path)


if __name__ == "__main__":
    main()
