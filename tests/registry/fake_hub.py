"""A local HTTP server that answers like the Hugging Face hub's file API:
the revision API, resolve URLs (LFS files 302 to a CDN-like path carrying
X-Linked-Etag / X-Linked-Size, small files served directly with a git-sha1
ETag), X-Repo-Commit, and Range requests. Faults on demand: drop the
connection partway through a file, or serve corrupted bytes once."""
import functools
import hashlib
import http.server
import json
import socket
import threading
import urllib.parse


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@functools.lru_cache(maxsize=None)
def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_lfs(name: str) -> bool:
    return name.endswith((".safetensors", ".gguf", ".bin"))


class Repo:
    def __init__(self, files: dict, commit: str = None, refs: dict = None):
        self.files = dict(files)
        self.commit = commit or hashlib.sha1(repr(sorted(self.files)).encode() + b"".join(
            self.files[k] for k in sorted(self.files))).hexdigest()
        self.refs = {"main": self.commit, **(refs or {})}
        self.history = {self.commit: self.files}

    def push(self, files: dict, ref: str = "main"):
        """A new commit on `ref` (the old one stays reachable by its hash)."""
        new = Repo(files)
        self.history[new.commit] = new.files
        self.refs[ref] = new.commit
        if ref == "main":
            self.commit, self.files = new.commit, new.files
        return new.commit


class FakeHub:
    def __init__(self):
        self.repos = {}
        self.renamed = {}        # old repo id -> new one (answered with relative 307s)
        self.log = []            # (method, path, headers) of every request
        self.drops = {}          # file name -> [bytes to send before dropping, times left]
        self.corrupt = {}        # file name -> times left to serve flipped bytes
        self.lock = threading.Lock()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests(self, method=None, contains=""):
        with self.lock:
            return [r for r in self.log if (method is None or r[0] == method) and contains in r[1]]

    # -- request handling --------------------------------------------------
    def _handle(self, h, head):
        path = urllib.parse.unquote(urllib.parse.urlsplit(h.path).path)
        with self.lock:
            self.log.append((h.command, path, {k.lower(): v for k, v in h.headers.items()}))
        parts = path.strip("/").split("/")
        for i in (2, 0):  # /api/models/OLD/... and /OLD/resolve/...
            old = "/".join(parts[i:i + 2])
            if old in self.renamed and (i == 2) == (parts[:2] == ["api", "models"]):
                parts[i:i + 2] = self.renamed[old].split("/")
                h.send_response(307)
                h.send_header("Location", "/" + "/".join(urllib.parse.quote(p, safe="") for p in parts))
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
            return self._revision(h, "/".join(parts[2:4]), "/".join(parts[5:]))
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), head)
        if parts[0] == "cdn" and len(parts) == 3:
            repo = self.repos.get(parts[1].replace("~", "/"))
            for files in (repo.history.values() if repo else []):
                for name, data in files.items():
                    if sha256(data) == parts[2]:
                        return self._send_file(h, name, data, head, {"ETag": f'"{parts[2]}"'})
        self._json(h, 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})

    def _json(self, h, status, obj, headers=None):
        body = json.dumps(obj).encode()
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _revision(self, h, repo_id, rev):
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._json(h, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        commit = repo.refs.get(rev, rev if rev in repo.history else None)
        if commit is None:
            return self._json(h, 404, {"error": f"Invalid rev id: {rev}"}, {"X-Error-Code": "RevisionNotFound"})
        files = repo.history[commit]
        self._json(h, 200, {"id": repo_id, "sha": commit, "siblings": [{"rfilename": n} for n in sorted(files)]})

    def _resolve(self, h, repo_id, rev, name, head):
        repo = self.repos.get(repo_id)
        commit = None if repo is None else repo.refs.get(rev, rev if rev in repo.history else None)
        if commit is None or name not in repo.history[commit]:
            return self._json(h, 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        data = repo.history[commit][name]
        if is_lfs(name):
            h.send_response(302)
            h.send_header("Location", f"/cdn/{repo_id.replace('/', '~')}/{sha256(data)}")
            h.send_header("X-Repo-Commit", commit)
            h.send_header("X-Linked-Etag", f'"{sha256(data)}"')
            h.send_header("X-Linked-Size", str(len(data)))
            h.send_header("ETag", f'"{git_sha1(b"lfs pointer " + data[:16])}"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        self._send_file(h, name, data, head, {"ETag": f'W/"{git_sha1(data)}"', "X-Repo-Commit": commit})

    def _send_file(self, h, name, data, head, headers):
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
        status = 206 if start > 0 else 200
        body = data[start:]
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        with self.lock:
            drop = self.drops.get(name)
            if drop and drop[1] > 0:
                drop[1] -= 1
            else:
                drop = None
            corrupt = self.corrupt.get(name, 0) > 0
            if corrupt:
                self.corrupt[name] -= 1
        if corrupt:
            body = bytes(b ^ 0x5A for b in body)
        if drop:
            h.wfile.write(body[:max(0, drop[0] - start)])
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
            return
        h.wfile.write(body)
