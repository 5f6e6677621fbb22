"""`get_file`: download a file once, cache it where Keras caches it, verify and extract it.

The cache is Keras's: `$KERAS_HOME/<cache_subdir>` (default `~/.keras/datasets`), with Keras's
file and extraction-directory names, so a file Keras already downloaded is used as is, and
Keras finds the files keratron downloads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import warnings
import zipfile

__all__ = ["get_file", "hash_file", "validate_file", "extract_archive"]

# Seconds to wait for the server to accept the connection or send data: an unreachable origin
# fails fast with a clear message instead of hanging.
DOWNLOAD_TIMEOUT = 15.0
_CHUNK = 1 << 16


def _keras_home() -> str:
    home = os.environ.get("KERAS_HOME")
    if home:
        return home
    base = os.path.expanduser("~")
    if not os.access(base, os.W_OK):
        base = tempfile.gettempdir()
    return os.path.join(base, ".keras")


def _resolve_hasher(algorithm, file_hash=None):
    if algorithm == "sha256":
        return hashlib.sha256()
    if algorithm == "auto" and file_hash is not None and len(file_hash) == 64:
        return hashlib.sha256()
    return hashlib.md5()


def hash_file(fpath, algorithm="sha256", chunk_size=65535) -> str:
    """The hex digest of a file ("sha256", "md5", or a hashlib object).

    Example:
        >>> import os, shutil, tempfile
        >>> from keratron.utils.file_utils import hash_file
        >>> tmp = tempfile.mkdtemp()
        >>> with open(os.path.join(tmp, "data.bin"), "wb") as f:
        ...     _ = f.write(b"keratron")
        >>> hash_file(os.path.join(tmp, "data.bin"))[:8]
        '6a4bf6c5'
        >>> shutil.rmtree(tmp)
    """
    hasher = _resolve_hasher(algorithm) if isinstance(algorithm, str) else algorithm
    with open(fpath, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def validate_file(fpath, file_hash, algorithm="auto", chunk_size=65535) -> bool:
    """Whether the file's hash equals `file_hash` ("auto": sha256 for 64 hex digits, else
    md5)."""
    hasher = _resolve_hasher(algorithm, file_hash)
    return str(hash_file(fpath, hasher, chunk_size)) == str(file_hash)


def _inside(base_dir, name) -> bool:
    target = os.path.realpath(os.path.join(base_dir, name))
    try:
        return os.path.commonpath([target, base_dir]) == base_dir
    except ValueError:
        return False


def _safe_tar_members(archive, base_dir):
    for info in archive.getmembers():
        ok = _inside(base_dir, info.name)
        if ok and (info.issym() or info.islnk()):
            link = info.linkname
            if info.issym():
                link = os.path.join(os.path.dirname(info.name), link)
            ok = _inside(base_dir, link)
        if ok and (info.isdev() or info.isfifo()):
            ok = False
        if ok:
            yield info
        else:
            warnings.warn(
                f"Skipping invalid path during archive extraction: '{info.name}'.", stacklevel=3
            )


def _extract_into(file_path, path, archive_format) -> bool:
    formats = ["tar", "zip"] if archive_format == "auto" else archive_format
    if isinstance(formats, str):
        formats = [formats]
    base_dir = os.path.realpath(path)
    for kind in formats:
        if kind == "tar" and tarfile.is_tarfile(file_path):
            with tarfile.open(file_path) as archive:
                members = list(_safe_tar_members(archive, base_dir))
                try:
                    archive.extractall(path, members=members, filter="data")
                except TypeError:  # Python without extraction filters
                    archive.extractall(path, members=members)
            return True
        if kind == "zip" and zipfile.is_zipfile(file_path):
            with zipfile.ZipFile(file_path) as archive:
                members = []
                for info in archive.infolist():
                    if _inside(base_dir, info.filename):
                        members.append(info)
                    else:
                        warnings.warn(
                            f"Skipping invalid path during archive extraction: '{info.filename}'.",
                            stacklevel=3,
                        )
                archive.extractall(path, members=members)
            return True
        if kind not in ("tar", "zip"):
            raise ValueError(
                f"extract_archive: unknown archive format {kind!r}; expected 'tar', 'zip', "
                "'auto' or None."
            )
    return False


def extract_archive(file_path, path=".", archive_format="auto") -> bool:
    """Extracts a tar (optionally compressed) or zip archive into `path`; entries that would
    land outside `path` are skipped. Returns whether the file was an archive of those formats.

    The archive is unpacked into a temporary directory first and moved into place, so an
    interrupted extraction never leaves a half-filled `path` behind.

    Example:
        >>> import os, shutil, tempfile, zipfile
        >>> from keratron.utils.file_utils import extract_archive
        >>> tmp = tempfile.mkdtemp()
        >>> with zipfile.ZipFile(os.path.join(tmp, "data.zip"), "w") as archive:
        ...     archive.writestr("data/a.txt", "hello")
        >>> extract_archive(os.path.join(tmp, "data.zip"), os.path.join(tmp, "out"))
        True
        >>> os.listdir(os.path.join(tmp, "out", "data"))
        ['a.txt']
        >>> shutil.rmtree(tmp)
    """
    if archive_format is None:
        return False
    file_path, path = os.fspath(file_path), os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".extract-", dir=parent)
    try:
        if not _extract_into(file_path, staging, archive_format):
            return False
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        os.replace(staging, path)
        return True
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


def _download(origin, target, fname) -> None:
    """Streams `origin` into `target` (through a temporary file) with a tqdm progress bar."""
    # Imported here: urllib.request pulls in http and ssl, which `import keratron` need not pay.
    import urllib.error
    import urllib.request

    from tqdm.auto import tqdm

    error = "URL fetch failure on {}: {} -- {}"
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(
        prefix=f".{os.path.basename(target)}.", suffix=".part", dir=directory
    )
    try:
        try:
            response = urllib.request.urlopen(origin, timeout=DOWNLOAD_TIMEOUT)
        except urllib.error.HTTPError as e:
            raise ConnectionError(error.format(origin, e.code, e.msg)) from None
        except urllib.error.URLError as e:
            reason = e.reason
            raise ConnectionError(
                error.format(origin, getattr(reason, "errno", None), reason)
                + " (the origin could not be reached)"
            ) from None
        except TimeoutError:
            raise ConnectionError(
                error.format(origin, None, f"no answer within {DOWNLOAD_TIMEOUT:g} s")
            ) from None
        with response, os.fdopen(fd, "wb") as out:
            fd = None
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=fname) as bar:
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except TimeoutError:
                        raise ConnectionError(
                            error.format(origin, None, "the download stalled (read timeout)")
                        ) from None
                    if not chunk:
                        break
                    out.write(chunk)
                    bar.update(len(chunk))
            out.flush()
            os.fsync(out.fileno())
            if total is not None and out.tell() != total:
                raise ConnectionError(
                    error.format(
                        origin, None, f"received {out.tell()} of {total} bytes (connection cut)"
                    )
                )
        os.replace(tmp, target)
    except BaseException:
        if fd is not None:
            os.close(fd)
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def get_file(
    fname=None,
    origin=None,
    untar=False,
    md5_hash=None,
    file_hash=None,
    cache_subdir="datasets",
    hash_algorithm="auto",
    extract=False,
    archive_format="auto",
    cache_dir=None,
    force_download=False,
):
    """Downloads a file from a URL if it is not already in the cache, as Keras does.

    Args:
        fname: the file name in the cache (default: the last part of the URL).
        origin: the URL to download from.
        untar: deprecated spelling of `extract=True` for tar archives.
        md5_hash: deprecated; same as `file_hash` with `hash_algorithm="md5"`.
        file_hash: the expected sha256 or md5 hex digest of the downloaded file.
        cache_subdir: subdirectory of the cache directory.
        hash_algorithm: "sha256", "md5" or "auto" (by the length of `file_hash`).
        extract: extract the archive after downloading; returns the extraction directory.
        archive_format: "auto", "tar", "zip", a list of them, or None.
        cache_dir: the cache root (default `$KERAS_HOME`, else `~/.keras`).
        force_download: download even if the file is cached.

    Returns:
        The path of the downloaded file, or of the extraction directory.

    Raises:
        ValueError: bad arguments, or a downloaded file whose hash does not match.
        ConnectionError: the origin could not be reached or answered with an error.

    Example:
        >>> import pathlib, shutil, tempfile
        >>> cache = pathlib.Path(tempfile.mkdtemp())
        >>> (cache / "datasets").mkdir()
        >>> (cache / "datasets" / "mnist.npz").touch()  # as if downloaded earlier
        >>> url = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
        >>> path = keratron.utils.get_file(origin=url, cache_dir=cache)  # cached: no download
        >>> pathlib.Path(path).relative_to(cache).as_posix()
        'datasets/mnist.npz'
        >>> shutil.rmtree(cache)
    """
    if origin is None:
        raise ValueError('Please specify the "origin" argument (URL of the file to download).')
    if cache_dir is None:
        cache_dir = _keras_home()
    if md5_hash is not None and file_hash is None:
        file_hash = md5_hash
        hash_algorithm = "md5"
    base = os.path.expanduser(os.fspath(cache_dir))
    try:
        os.makedirs(base, exist_ok=True)
    except OSError:
        pass
    if not os.access(base, os.W_OK):
        base = os.path.join(tempfile.gettempdir(), ".keras")
    datadir = os.path.join(base, cache_subdir)
    os.makedirs(datadir, exist_ok=True)

    provided = fname
    fname = os.fspath(fname) if fname is not None else None
    if not fname:
        fname = os.path.basename(urllib.parse.urlsplit(origin).path)
        if not fname:
            raise ValueError(
                f"Can't parse the file name from the origin provided: '{origin}'. Please "
                "specify the `fname` argument."
            )
    elif os.sep in fname:
        raise ValueError(
            "Paths are no longer accepted as the `fname` argument. To specify the file's parent "
            f"directory, use the `cache_dir` argument. Received: fname={fname}"
        )

    # Keras's naming: an archive "x.tar.gz" is kept as such and extracted to "x_extracted";
    # a name without a dot is the extraction directory and the archive is "<name>_archive".
    extraction_dir = None
    if extract or untar:
        if provided and "." in fname:
            download_target = os.path.join(datadir, fname)
            extraction_dir = os.path.join(datadir, f"{fname[: fname.find('.')]}_extracted")
        else:
            extraction_dir = os.path.join(datadir, fname)
            download_target = os.path.join(datadir, f"{fname}_archive")
    else:
        download_target = os.path.join(datadir, fname)

    download = True
    if not force_download and os.path.exists(download_target):
        download = False
        if file_hash is not None and not validate_file(
            download_target, file_hash, algorithm=hash_algorithm
        ):
            print(
                "A local file was found, but it seems to be incomplete or outdated because the "
                f"{_resolve_hasher(hash_algorithm, file_hash).name} file hash does not match the "
                f"original value of {file_hash} so we will re-download the data."
            )
            download = True
    algorithm = _resolve_hasher(hash_algorithm, file_hash).name if file_hash else hash_algorithm
    if download:
        print(f"Downloading data from {origin}")
        _download(origin, download_target, fname)
        if file_hash is not None and not validate_file(
            download_target, file_hash, algorithm=hash_algorithm
        ):
            os.remove(download_target)
            raise ValueError(
                f"Incomplete or corrupted file detected at '{download_target}' (downloaded from "
                f"{origin}). The {algorithm} file hash does not match the provided value "
                f"of {file_hash}."
            )

    if extraction_dir is not None:
        if untar:
            archive_format = "tar"
        if download or not os.path.isdir(extraction_dir):
            if not extract_archive(download_target, extraction_dir, archive_format):
                warnings.warn(
                    f"Could not extract archive '{download_target}' (format {archive_format!r}).",
                    stacklevel=2,
                )
        return extraction_dir
    return download_target
