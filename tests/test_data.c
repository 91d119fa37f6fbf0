/* test_data.c: shards, the loader, the cleanup rules and `prepare` on tiny fake
 * package trees (S2HC_DATA_ROOT), so no Debian corpus is needed. */
#include "harness/data.h"
#include "harness/util.h"
#include "tests/t.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmp_root[1024];

/* A fresh directory under S2HC_TEST_TMP (or a mkdtemp) for one test. */
static const char *tmp_dir(const char *name) {
    static char buf[1200];
    if (!tmp_root[0]) t_setup_tmp("test_data", tmp_root, sizeof tmp_root);
    snprintf(buf, sizeof buf, "%s/%s", tmp_root, name);
    mkdir_p(buf);
    return buf;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen_check(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void write_text(const char *path, const char *text) { write_file(path, text, strlen(text)); }

static size_t read_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Apply a cleanup rule to a literal and compare with the expected text. */
#define CHECK_RULE(fn, in, want)                                                           \
    do {                                                                                   \
        const char *in_ = (in), *want_ = (want);                                           \
        size_t n_ = strlen(in_);                                                           \
        char *out_ = malloc_check(n_ + 2);                                                 \
        size_t k_ = fn(in_, n_, out_);                                                     \
        out_[k_] = '\0';                                                                   \
        CHECK(strcmp(out_, want_) == 0, #fn ":\n--- got\n%s\n--- want\n%s\n---", out_, want_); \
        free(out_);                                                                        \
    } while (0)

static void test_shard_roundtrip_u8(void) {
    char path[1400];
    snprintf(path, sizeof path, "%s/sub/dir/a.bin", tmp_dir("rt8")); /* parents are created */
    uint8_t tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (uint8_t)(i * 37 + 5);
    CHECK(shard_write(path, tok, 1000, 256, 1) == 0, "write");
    char tmp[1500];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(!file_exists(tmp), "temp file left behind");
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 32 + 1000, "size %lld", (long long)st.st_size);
    data_shard s;
    char err[2048];
    CHECK(shard_open(&s, path, err, sizeof err) == 0, "%s", err);
    CHECK(s.count == 1000 && s.vocab == 256 && s.bytes_per_token == 1, "header %llu %u %u",
          (unsigned long long)s.count, s.vocab, s.bytes_per_token);
    int bad = 0;
    for (int i = 0; i < 1000; i++) bad += shard_token(&s, (uint64_t)i) != tok[i];
    CHECK(bad == 0, "%d tokens differ", bad);
    shard_close(&s);
    /* overwriting is atomic too */
    CHECK(shard_write(path, tok, 10, 256, 1) == 0, "rewrite");
    CHECK(shard_open(&s, path, err, sizeof err) == 0 && s.count == 10, "reopen");
    shard_close(&s);
}

static void test_shard_roundtrip_u16(void) {
    char path[1400];
    snprintf(path, sizeof path, "%s/b.bin", tmp_dir("rt16"));
    uint16_t tok[513];
    for (int i = 0; i < 513; i++) tok[i] = (uint16_t)((i * 977) % 50257);
    CHECK(shard_write(path, tok, 513, 50257, 2) == 0, "write");
    data_shard s;
    char err[2048];
    CHECK(shard_open(&s, path, err, sizeof err) == 0, "%s", err);
    CHECK(s.count == 513 && s.vocab == 50257 && s.bytes_per_token == 2, "header");
    int bad = 0;
    for (int i = 0; i < 513; i++) bad += shard_token(&s, (uint64_t)i) != tok[i];
    CHECK(bad == 0, "%d tokens differ", bad);
    shard_close(&s);
    CHECK(shard_write(path, tok, 4, 300, 1) != 0, "vocab 300 in 1-byte tokens must be refused");
    CHECK(shard_write(path, tok, 4, 256, 3) != 0, "3-byte tokens must be refused");
}

/* Write a valid shard, damage it with `damage`, expect shard_open to refuse it with an
 * error that names the file and contains `what`. */
static void expect_refused(const char *name, void (*damage)(const char *path), const char *what) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s.bin", tmp_dir("corrupt"), name);
    uint16_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = (uint16_t)i;
    shard_write(path, tok, 100, 1000, 2);
    damage(path);
    data_shard s;
    char err[2048] = "";
    CHECK(shard_open(&s, path, err, sizeof err) != 0, "%s: corrupt shard accepted", name);
    CHECK(strstr(err, path) != NULL, "%s: error does not name the file: %s", name, err);
    CHECK(strstr(err, what) != NULL, "%s: error lacks '%s': %s", name, what, err);
}
static void poke(const char *path, long off, const void *bytes, size_t n) {
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, bytes, n, off) != (ssize_t)n) die(1, "poke %s", path);
    close(fd);
}
static void dmg_magic(const char *p) { poke(p, 0, "XXXX", 4); }
static void dmg_version(const char *p) { uint32_t v = 7; poke(p, 8, &v, 4); }
static void dmg_bpt(const char *p) { uint32_t v = 4; poke(p, 16, &v, 4); }
static void dmg_count(const char *p) { uint64_t v = 101; poke(p, 24, &v, 8); }
static void dmg_truncate(const char *p) { if (truncate(p, 32 + 150) != 0) die(1, "truncate"); }
static void dmg_short(const char *p) { if (truncate(p, 20) != 0) die(1, "truncate"); }
static void dmg_token(const char *p) { uint16_t v = 1000; poke(p, 32 + 2 * 50, &v, 2); }
static void dmg_missing(const char *p) { unlink(p); }
static void dmg_vocab0(const char *p) { uint32_t v = 0; poke(p, 12, &v, 4); }
static void dmg_reserved(const char *p) { uint32_t v = 1; poke(p, 20, &v, 4); }
/* a count whose bytes wrap past 2^64 to the file's size: 100 + 2^63 two-byte tokens */
static void dmg_count_wrap(const char *p) { uint64_t v = 100 + (1ull << 63); poke(p, 24, &v, 8); }

/* A path too long for write_file_atomic's buffers: refused whole, no folder made under a
 * name cut short, nothing written */
static void test_write_long_path(void) {
    const char *dir = tmp_dir("longpath");
    char path[1400];
    int n = snprintf(path, sizeof path, "%s/long-", dir);
    for (; n < 1040; n++) path[n] = n % 200 ? 'd' : '/'; /* folders of 200 bytes (a name's limit is 255) */
    snprintf(path + n, sizeof path - (size_t)n, "/f.bin");
    errno = 0;
    CHECK(write_file_atomic(path, "x", 1, NULL, 0) == -1 && errno == ENAMETOOLONG, "refused: errno %d", errno);
    DIR *d = opendir(dir);
    int made = 0;
    for (struct dirent *e; d && (e = readdir(d));) made += e->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(made == 0, "nothing made in %s (%d entries)", dir, made);
}

/* The atomic writers' promises: a path of exactly 1023 bytes is written; a link at
 * path.tmp is replaced, never followed; a rename that fails leaves no path.tmp; a stream's
 * path too long to keep whole is refused; parent_dir of a file at the root is "/". */
/* A .tmp another writer holds (its lock, as tmp_create takes it: an OFD lock conflicts
 * with another open of the file in this process too) is refused with EBUSY, left as it
 * is, the path untouched; one nobody holds (a writer that died) is replaced; and a writer's
 * own .tmp stays held until it is renamed, so a second writer of the path is refused
 * meanwhile, by write_file_atomic and tmp_stream_open alike. */
static int lock_whole(int fd) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    return fcntl(fd, F_OFD_SETLK, &fl);
}

static void test_write_tmp_held(void) {
    const char *dir = tmp_dir("held");
    char path[1300], tmp[1320];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    write_file(path, "old", 3);
    int other = open(tmp, O_RDWR | O_CREAT | O_EXCL, 0644);
    CHECK(other >= 0 && lock_whole(other) == 0 && write(other, "half", 4) == 4, "another writer's .tmp");
    errno = 0;
    CHECK(write_file_atomic(path, "new", 3, NULL, 0) == -1 && errno == EBUSY, "refused while held: errno %d", errno);
    struct stat st;
    CHECK(stat(tmp, &st) == 0 && st.st_size == 4 && stat(path, &st) == 0 && st.st_size == 3,
          "its .tmp and the path as they were");
    errno = 0;
    CHECK(tmp_stream_open(path) == NULL && errno == EBUSY, "a stream refused too: errno %d", errno);
    CHECK(stat(tmp, &st) == 0 && st.st_size == 4, "its .tmp still there");
    close(other); /* the writer gone: its .tmp is a stale one, replaced */
    CHECK(write_file_atomic(path, "newer", 5, NULL, 0) == 0 && stat(path, &st) == 0 && st.st_size == 5 &&
              !file_exists(tmp),
          "written once nobody holds the .tmp");
    /* this process's own writer holds its .tmp: from the create to the rename */
    CHECK(write_file_tmp(path, "abc", 3, NULL, 0) == 0, "write_file_tmp");
    const int look = open(tmp, O_RDONLY);
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    CHECK(look >= 0 && fcntl(look, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK,
          "held between write_file_tmp and commit_file_tmp");
    if (look >= 0) close(look);
    errno = 0;
    CHECK(write_file_atomic(path, "x", 1, NULL, 0) == -1 && errno == EBUSY, "a second writer refused meanwhile");
    CHECK(commit_file_tmp(path) == 0 && stat(path, &st) == 0 && st.st_size == 3 && !file_exists(tmp),
          "the first one's file committed");
    FILE *a = tmp_stream_open(path);
    CHECK(a != NULL, "a stream");
    errno = 0;
    CHECK(tmp_stream_open(path) == NULL && errno == EBUSY, "a second stream on the path refused: errno %d", errno);
    if (a) {
        fputs("stream", a);
        CHECK(tmp_stream_commit(a) == 0 && stat(path, &st) == 0 && st.st_size == 6, "the first stream's file");
    }
    CHECK(write_file_atomic(path, "free", 4, NULL, 0) == 0, "free again after the rename");
    /* a .tmp that cannot be removed (a folder of that name) is no writer's: refused with
       the error itself, never "another process is writing it now" */
    CHECK(mkdir(tmp, 0777) == 0, "a folder at the .tmp");
    errno = 0;
    CHECK(write_file_atomic(path, "x", 1, NULL, 0) == -1 && errno != EBUSY && errno != 0,
          "a folder at the .tmp: errno %d (%s)", errno, strerror(errno));
    errno = 0;
    CHECK(tmp_stream_open(path) == NULL && errno != EBUSY && errno != 0, "a stream too: errno %d (%s)", errno,
          strerror(errno));
    CHECK(stat(tmp, &st) == 0 && S_ISDIR(st.st_mode) && stat(path, &st) == 0 && st.st_size == 4,
          "the folder and the path as they were");
    rmdir(tmp);
}

static void test_write_files(void) {
    const char *dir = tmp_dir("atomic");
    char path[1400], tmp[1420];
    int n = snprintf(path, sizeof path, "%s/long-", dir);
    for (; n < 1023 - 6; n++) path[n] = n % 200 ? 'd' : '/';
    snprintf(path + n, sizeof path - (size_t)n, "/f.bin");
    CHECK(strlen(path) == 1023, "%zu bytes", strlen(path));
    CHECK(write_file_atomic(path, "x", 1, NULL, 0) == 0 && file_exists(path), "a path of 1023 bytes is written");
    /* a link at path.tmp to another file: that file is kept */
    char victim[1300], target[1300];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(target, sizeof target, "%s/out.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", target);
    write_file(victim, "keep", 4);
    CHECK(symlink(victim, tmp) == 0, "symlink");
    CHECK(write_file_atomic(target, "new", 3, NULL, 0) == 0, "written past a link at .tmp");
    char got[8] = "";
    FILE *f = fopen_check(victim, "rb");
    CHECK(fread(got, 1, sizeof got, f) == 4 && !memcmp(got, "keep", 4), "the link's target kept: '%.4s'", got);
    fclose(f);
    struct stat st;
    CHECK(lstat(tmp, &st) != 0 && lstat(target, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 3, "out.bin written");
    /* a directory at the path: the rename fails, no .tmp left */
    char sub[1300], inner[1320];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    snprintf(inner, sizeof inner, "%s/x", sub);
    write_file_atomic(inner, "x", 1, NULL, 0);
    snprintf(tmp, sizeof tmp, "%s.tmp", sub);
    CHECK(write_file_atomic(sub, "y", 1, NULL, 0) == -1 && !file_exists(tmp), "over a directory: refused, no .tmp");
    FILE *s = tmp_stream_open(sub);
    CHECK(s && tmp_stream_path(s) && !strcmp(tmp_stream_path(s), sub), "a stream on adir.tmp");
    if (s) {
        fputs("y", s);
        CHECK(tmp_stream_commit(s) == -1 && !file_exists(tmp), "a stream over a directory: -1, no .tmp");
    }
    /* a stream's .tmp: a link there is replaced too */
    snprintf(tmp, sizeof tmp, "%s.tmp", target);
    CHECK(symlink(victim, tmp) == 0, "symlink");
    s = tmp_stream_open(target);
    CHECK(s != NULL, "a stream past a link at .tmp: %s", strerror(errno));
    if (s) {
        fputs("stream", s);
        CHECK(tmp_stream_commit(s) == 0, "committed");
    }
    f = fopen_check(victim, "rb");
    CHECK(fread(got, 1, sizeof got, f) == 4 && !memcmp(got, "keep", 4), "the link's target kept: '%.4s'", got);
    fclose(f);
    CHECK(stat(target, &st) == 0 && st.st_size == 6, "out.bin is the stream's");
    /* a stream whose path does not fit its record (1290 bytes) is refused */
    n = snprintf(path, sizeof path, "%s/", dir);
    for (; n < 1290; n++) path[n] = n % 200 ? 's' : '/';
    path[n] = '\0';
    errno = 0;
    CHECK(tmp_stream_open(path) == NULL && errno == ENAMETOOLONG, "a stream path of 1290 bytes: errno %d", errno);
    CHECK(tmp_stream_path(stdout) == NULL && tmp_stream_path(NULL) == NULL, "no path for a stream not its own");
    /* a write that failed earlier (past the file-size limit), though the flush at the end
       has nothing left to write: -1, no .tmp, the old file kept */
    {
        struct rlimit old, lim;
        getrlimit(RLIMIT_FSIZE, &old);
        lim = old;
        lim.rlim_cur = 4096;
        void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
        FILE *big = tmp_stream_open(target);
        CHECK(big != NULL, "stream");
        if (big && setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            static char block[65536];
            fwrite(block, 1, sizeof block, big);
            const int rc = tmp_stream_commit(big);
            const int e = errno;
            setrlimit(RLIMIT_FSIZE, &old);
            snprintf(tmp, sizeof tmp, "%s.tmp", target);
            CHECK(rc == -1 && !file_exists(tmp) && stat(target, &st) == 0 && st.st_size == 6,
                  "a write past the limit: rc %d, %s", rc, strerror(e));
        }
        signal(SIGXFSZ, was);
    }
    char pd[64];
    parent_dir(pd, sizeof pd, "/f");
    CHECK(!strcmp(pd, "/"), "parent of /f: '%s'", pd);
    parent_dir(pd, sizeof pd, "f");
    CHECK(!strcmp(pd, "."), "parent of f: '%s'", pd);
    parent_dir(pd, sizeof pd, "a/b/c");
    CHECK(!strcmp(pd, "a/b"), "parent of a/b/c: '%s'", pd);
}

static void test_shard_corrupt(void) {
    expect_refused("magic", dmg_magic, "magic");
    expect_refused("version", dmg_version, "version 7");
    expect_refused("bpt", dmg_bpt, "bytes per token");
    expect_refused("count", dmg_count, "truncated or corrupt");
    expect_refused("truncated", dmg_truncate, "truncated or corrupt");
    expect_refused("short", dmg_short, "shorter than");
    expect_refused("token", dmg_token, "outside the vocab");
    expect_refused("missing", dmg_missing, "data prepare");
    expect_refused("vocab0", dmg_vocab0, "vocab 0 does not fit");
    expect_refused("reserved", dmg_reserved, "reserved header field");
    expect_refused("countwrap", dmg_count_wrap, "truncated or corrupt");
}

/* A uint8 shard whose header says vocab 100 holds only tokens < 100 (shard_open scans it,
 * as it does uint16 shards), and a shard meets a model only when its tokens fit the
 * model's vocabulary (shard_fits): tokens >= model.vocab would index past the embedding (a training on a uint16
 * corpus with model.vocab 256 aborted in the cross-entropy). */
static void test_shard_vocab(void) {
    char path[1400], err[2048] = "";
    snprintf(path, sizeof path, "%s/v100.bin", tmp_dir("vocab"));
    uint8_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (uint8_t)(i % 100);
    CHECK(shard_write(path, tok, 64, 100, 1) == 0, "write");
    data_shard s;
    CHECK(shard_open(&s, path, err, sizeof err) == 0, "tokens < vocab: %s", err);
    CHECK(shard_fits(&s, 100, 0, err, sizeof err) == 0, "vocab 100 fits model.vocab 100: %s", err);
    CHECK(shard_fits(&s, 256, 0, err, sizeof err) == 0, "and model.vocab 256: %s", err);
    CHECK(shard_fits(&s, 50, 0, err, sizeof err) == -1, "tokens 50..99 do not fit model.vocab 50");
    CHECK(strstr(err, path) && strstr(err, "token 50 is 50") && strstr(err, "model.vocab"), "names file, token, key: %s",
          err);
    CHECK(shard_fits(&s, 256, 256, err, sizeof err) == -1 && strstr(err, "a vocabulary of 100 tokens where the training "
          "corpus has 256"), "another corpus's vocabulary: %s", err);
    shard_close(&s);
    uint8_t big = 200;
    poke(path, 32 + 10, &big, 1);
    CHECK(shard_open(&s, path, err, sizeof err) != 0, "a byte 200 in a shard of vocab 100 is refused");
    CHECK(strstr(err, path) && strstr(err, "outside the vocab"), "error: %s", err);
    uint16_t wide[40];
    for (int i = 0; i < 40; i++) wide[i] = (uint16_t)(i * 20);
    snprintf(path, sizeof path, "%s/v1000.bin", tmp_dir("vocab"));
    CHECK(shard_write(path, wide, 40, 1000, 2) == 0 && shard_open(&s, path, err, sizeof err) == 0, "u16: %s", err);
    CHECK(shard_fits(&s, 256, 0, err, sizeof err) == -1 && strstr(err, "token 13 is 260"), "u16 vs 256: %s",
          err);
    shard_close(&s);
    /* a byte shard (header vocab 256) of ASCII text fits a model of 128 tokens */
    for (int i = 0; i < 64; i++) tok[i] = (uint8_t)('a' + i % 26);
    snprintf(path, sizeof path, "%s/ascii.bin", tmp_dir("vocab"));
    CHECK(shard_write(path, tok, 64, 256, 1) == 0 && shard_open(&s, path, err, sizeof err) == 0, "ascii: %s", err);
    CHECK(shard_fits(&s, 128, 0, err, sizeof err) == 0, "ASCII fits model.vocab 128: %s", err);
    CHECK(shard_fits(&s, 100, 0, err, sizeof err) == -1 && strstr(err, "is 100"), "'d' (100) does not fit 100");
    /* text and a tokenizer's ids of the same vocabulary (256) are not one kind of corpus */
    const uint32_t text = shard_kind(&s);
    CHECK(text == 256, "a byte shard's kind is its vocabulary: %u", text);
    CHECK(shard_fits(&s, 256, text, err, sizeof err) == 0, "text beside text: %s", err);
    CHECK(shard_fits(&s, 256, 256 | SHARD_IDS, err, sizeof err) == -1 && strstr(err, path) &&
          strstr(err, "bytes of text, where the training corpus holds a tokenizer's ids"), "text beside ids: %s", err);
    shard_close(&s);
    for (int i = 0; i < 40; i++) wide[i] = (uint16_t)(i * 6);
    snprintf(path, sizeof path, "%s/ids256.bin", tmp_dir("vocab"));
    CHECK(shard_write(path, wide, 40, 256, 2) == 0 && shard_open(&s, path, err, sizeof err) == 0, "ids256: %s", err);
    CHECK(shard_kind(&s) == (256 | SHARD_IDS), "a 2-byte shard's kind says ids: %x", shard_kind(&s));
    CHECK(shard_fits(&s, 256, text, err, sizeof err) == -1 && strstr(err, "token ids") &&
          strstr(err, "holds bytes of text"), "ids beside text: %s", err);
    CHECK(shard_fits(&s, 256, 256 | SHARD_IDS, err, sizeof err) == 0, "ids beside ids: %s", err);
    shard_close(&s);
}

/* A FIFO under a shard's name is refused at once (shard_open blocked in open(2) for a
 * writer that never came: `s2hc train` hung). The alarm ends a hanging test. */
static void test_shard_fifo(void) {
    char path[1400], err[2048] = "";
    snprintf(path, sizeof path, "%s/val.bin", tmp_dir("fifo"));
    unlink(path);
    if (mkfifo(path, 0644) != 0) { CHECK(0, "mkfifo %s", path); return; }
    data_shard s;
    alarm(30);
    CHECK(shard_open(&s, path, err, sizeof err) != 0, "a FIFO is not a shard");
    alarm(0);
    CHECK(strstr(err, path) && strstr(err, "not a regular file"), "error: %s", err);
    unlink(path);
}

/* A shard whose token at position p is p % 251, so a window reveals its start. */
static void make_counting_shard(const char *path, uint64_t count) {
    uint8_t *tok = malloc_check(count);
    for (uint64_t i = 0; i < count; i++) tok[i] = (uint8_t)(i % 251);
    shard_write(path, tok, count, 256, 1);
    free(tok);
}

static void test_loader_determinism(void) {
    char path[1400], err[2048];
    snprintf(path, sizeof path, "%s/count.bin", tmp_dir("loader"));
    make_counting_shard(path, 5000);
    enum { B = 4, T = 16 };
    int in1[B * T], tg1[B * T], in2[B * T], tg2[B * T];
    data_loader a, b, c;
    CHECK(loader_open(&a, path, 1234, err, sizeof err) == 0, "%s", err);
    CHECK(loader_open(&b, path, 1234, err, sizeof err) == 0, "%s", err);
    CHECK(loader_open(&c, path, 1235, err, sizeof err) == 0, "%s", err);
    CHECK(a.rng != 0, "rng state is zero");
    int same = 1, differs = 0, shifted = 1, consecutive = 1;
    for (int step = 0; step < 20; step++) {
        loader_next(&a, B, T, in1, tg1);
        loader_next(&b, B, T, in2, tg2);
        same &= memcmp(in1, in2, sizeof in1) == 0 && memcmp(tg1, tg2, sizeof tg1) == 0;
        loader_next(&c, B, T, in2, tg2);
        differs |= memcmp(in1, in2, sizeof in1) != 0;
        for (int r = 0; r < B; r++)
            for (int t = 0; t < T; t++) {
                if (t + 1 < T) shifted &= tg1[r * T + t] == in1[r * T + t + 1];
                consecutive &= tg1[r * T + t] == (in1[r * T + t] + 1) % 251;
            }
    }
    CHECK(same, "same seed gave different batches");
    CHECK(differs, "different seeds gave the same batches");
    CHECK(shifted, "targets are not inputs shifted by one");
    CHECK(consecutive, "windows are not contiguous runs of the shard");
    /* the state is one uint64: restoring it replays the batch */
    uint64_t saved = a.rng;
    loader_next(&a, B, T, in1, tg1);
    a.rng = saved;
    loader_next(&a, B, T, in2, tg2);
    CHECK(memcmp(in1, in2, sizeof in1) == 0, "restored rng did not replay the batch");
    loader_close(&a);
    loader_close(&b);
    loader_close(&c);
    CHECK(loader_open(&a, "/nonexistent/x.bin", 1, err, sizeof err) != 0 && strstr(err, "/nonexistent/x.bin"),
          "missing shard: %s", err);
}

static void test_loader_range(void) {
    /* count = T + 5: starts are 0..4, each must appear, nothing beyond */
    char path[1400], err[2048];
    snprintf(path, sizeof path, "%s/small.bin", tmp_dir("loader"));
    enum { T = 8 };
    make_counting_shard(path, T + 5);
    data_loader l;
    CHECK(loader_open(&l, path, 7, err, sizeof err) == 0, "%s", err);
    int seen[256] = {0}, in[T], tg[T];
    for (int i = 0; i < 500; i++) {
        loader_next(&l, 1, T, in, tg);
        seen[in[0]]++;
    }
    int ok = 1;
    for (int s = 0; s < 256; s++) ok &= (s <= 4) ? seen[s] > 0 : seen[s] == 0;
    CHECK(ok, "starts outside [0, count-T-1] or not all reached: %d %d %d %d %d %d", seen[0], seen[1], seen[2],
          seen[3], seen[4], seen[5]);
    loader_close(&l);
}

static void test_eval_windows(void) {
    char path[1400], err[2048];
    snprintf(path, sizeof path, "%s/eval.bin", tmp_dir("loader"));
    enum { T = 10 };
    make_counting_shard(path, 1001);
    data_shard s;
    CHECK(shard_open(&s, path, err, sizeof err) == 0, "%s", err);
    uint64_t nw = loader_eval_windows(&s, T);
    CHECK(nw == 100, "windows %llu, want 100", (unsigned long long)nw);
    static int covered[1001];
    memset(covered, 0, sizeof covered);
    int in[3 * T], tg[3 * T], ok = 1;
    for (uint64_t w = 0; w + 3 <= nw; w += 3) {
        loader_eval_batch(&s, w, 3, T, in, tg);
        for (int b = 0; b < 3; b++)
            for (int t = 0; t < T; t++) {
                uint64_t pos = (w + (uint64_t)b) * T + (uint64_t)t;
                ok &= in[b * T + t] == (int)(pos % 251) && tg[b * T + t] == (int)((pos + 1) % 251);
                covered[pos]++;
            }
    }
    loader_eval_batch(&s, 99, 1, T, in, tg);
    for (int t = 0; t < T; t++) covered[990 + t]++;
    CHECK(ok, "eval windows hold the wrong tokens");
    CHECK(tg[T - 1] == 1000 % 251, "the last window's last target is not the shard's last token");
    int once = 1;
    for (int p = 0; p < 1000; p++) once &= covered[p] == 1;
    CHECK(once, "eval windows do not cover the shard exactly once");
    shard_close(&s);
    make_counting_shard(path, 1000);
    CHECK(shard_open(&s, path, err, sizeof err) == 0 && loader_eval_windows(&s, T) == 99, "1000 tokens: 99 windows");
    shard_close(&s);
}

static void test_b64(void) {
    uint64_t v = 99;
    CHECK(data_b64_decode("A", 1, &v) == 0 && v == 0, "A -> %llu", (unsigned long long)v);
    CHECK(data_b64_decode("B", 1, &v) == 0 && v == 1, "B");
    CHECK(data_b64_decode("BA", 2, &v) == 0 && v == 64, "BA");
    CHECK(data_b64_decode("Kj", 2, &v) == 0 && v == 675, "Kj (gcide 00-database-info offset) -> %llu",
          (unsigned long long)v);
    CHECK(data_b64_decode("uk", 2, &v) == 0 && v == 2980, "uk -> %llu", (unsigned long long)v);
    CHECK(data_b64_decode("/", 1, &v) == 0 && v == 63, "/");
    CHECK(data_b64_decode("+/", 2, &v) == 0 && v == 62 * 64 + 63, "+/");
    CHECK(data_b64_decode("VR/j", 4, &v) == 0 && v == ((21ull * 64 + 17) * 64 + 63) * 64 + 35, "VR/j");
    CHECK(data_b64_decode("", 0, &v) != 0, "empty accepted");
    CHECK(data_b64_decode("A=", 2, &v) != 0, "'=' accepted");
    CHECK(data_b64_decode("A B", 3, &v) != 0, "space accepted");
    CHECK(data_b64_decode("AAAAAAAAAAA", 11, &v) != 0, "11 digits accepted");
}

static void test_gcide_clean(void) {
    CHECK_RULE(data_gcide_clean,
               "Abandon \\A*ban\"don\\ ([.a]*b[a^]n\"d[u^]n), v. t. [imp. & p. p.\n"
               "   {Abandoned} (-d[u^]nd); p. pr. [OF. abandoner.]\n"
               "   1. To cast out. [Obs.]\n"
               "      [1913 Webster]\n"
               "\n"
               "   Syn: To give up. [WordNet 1.5 +PJC]\n"
               "   Alg[ae] and na[imac]ve; caf['e] (F.) [R.] [Zo[\"o]l.]\n",
               "Abandon, v. t. [imp. & p. p.\n"
               "   Abandoned; p. pr. [OF. abandoner.]\n"
               "   1. To cast out. [Obs.]\n"
               "\n"
               "   Syn: To give up.\n"
               "   Algae and naive; cafe (F.) [R.] [Zool.]\n");
    /* a wrapped headword span and a pronunciation group that wraps */
    CHECK_RULE(data_gcide_clean,
               "Anopsia \\An*op\"si*a\\ (\n   [a^]n\"[o^]p`s[y^]), n. (Med.)\n   Blindness. [Webster 1913 Suppl.]\n"
               "Adjusting surface \\Adjusting\nsurface\\ (Aeronautics)\n",
               "Anopsia, n. (Med.)\n   Blindness.\n"
               "Adjusting surface (Aeronautics)\n");
    /* etymology brackets and labels are text, not tags */
    CHECK_RULE(data_gcide_clean, "[Gr. ? + -logy.] [AS. on] [1913 Webster + AS]\n", "[Gr. ? + -logy.] [AS. on]\n");
    CHECK_RULE(data_braces_clean, "A {virtual machine} is {an} {abstract machine}.", "A virtual machine is an abstract machine.");
}

static void test_kjv_refs(void) {
    CHECK_RULE(data_kjv_strip_refs,
               "Ge1:1 In the beginning.\n1Chr2:3 Text 4:5 here.\nSSol1:1 The song.\nno ref line\nRev22:21 Amen.",
               "In the beginning.\nText 4:5 here.\nThe song.\nno ref line\nAmen.");
    CHECK_RULE(data_kjv_strip_refs, "Ge1: not a ref\nGe1:1x no space\n", "Ge1: not a ref\nGe1:1x no space\n");
}

static void test_info_clean(void) {
    CHECK_RULE(data_info_clean,
               "This is x.info, produced by makeinfo.\nINFO-DIR-SECTION X\n"
               "\x1f\nFile: x.info,  Node: Top,  Next: A,  Up: (dir)\n\nTitle\n*****\n\n* Menu:\n\n* A::\n"
               "* B: B node.\n\n"
               "\x1f\nFile: x.info,  Node: A,  Prev: Top\n\n"
               "Use *note yield: 656. to return, see *note next(): 416, or *note\nfoo():\n1a2. and *note Intro::.\n"
               "   * an indented bullet: stays\n"
               "\x1f\nFile: x.info,  Node: Index,  Prev: A\n\nIndex\n*****\n\n* Menu:\n\n"
               "* abs(): A.    (line 7)\n"
               "* a long entry, wrapped: A.\n                                        (line  12)\n"
               "      (line 3)\n"
               "(line 4)\n"
               "\x1f\nTag Table:\nNode: Top\x7f" "100\n\x1f\nEnd Tag Table\n",
               "\nTitle\n*****\n\n\n\n\nUse yield to return, see next(), or \nfoo() and Intro.\n"
               "   * an indented bullet: stays\n"
               "\nIndex\n*****\n\n\n      (line 3)\n(line 4)\n");
}

static void test_small_rules(void) {
    CHECK_RULE(data_normalise, "\n\nline one  \r\n\n\n\nline two\t\n\n", "line one\n\nline two\n");
    CHECK_RULE(data_normalise, "no newline", "no newline\n");
    CHECK_RULE(data_normalise, "\n \n\t\n", "");
    CHECK_RULE(data_fortune_clean, "one\n%\ntwo\n  lines\n%\nthree 100%\n%\n", "one\n\n\ntwo\n  lines\n\n\nthree 100%\n\n\n");
    CHECK_RULE(data_rst_clean, ".. SPDX-License-Identifier: GPL-2.0\n\nTitle\n=====\n.. note:: kept\n",
               "\nTitle\n=====\n.. note:: kept\n");
    /* the split: floor(0.99 n) moved forward to a line start */
    char text[1000];
    for (int i = 0; i < 1000; i++) text[i] = (i % 10 == 9) ? '\n' : 'x';
    CHECK(data_split_point(text, 1000) == 990, "lines of 10: %zu", data_split_point(text, 1000));
    for (int i = 0; i < 1000; i++) text[i] = (i % 7 == 6) ? '\n' : 'x';
    CHECK(data_split_point(text, 1000) == 994, "lines of 7: %zu", data_split_point(text, 1000));
    CHECK(data_split_point(text, 0) == 0, "empty");
    memset(text, 'x', sizeof text);
    CHECK(data_split_point(text, 1000) == 1000, "one long line goes to train whole");
    /* every byte a line end: the cut is floor(0.99 n) itself, for any n, 1000's multiples
     * or not */
    static char nl[5000];
    memset(nl, '\n', sizeof nl);
    const size_t ns[] = {1, 99, 100, 101, 999, 1001, 1999, 2500, 4999, 5000};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        const size_t want = ns[i] * 99 / 100;
        CHECK(data_split_point(nl, ns[i]) == want, "n = %zu: cut %zu, floor(0.99 n) = %zu", ns[i],
              data_split_point(nl, ns[i]), want);
    }
}

/* ---- prepare on a fake package tree ---- */

static void b64_encode(uint64_t v, char *out) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char tmp[16];
    int k = 0;
    do { tmp[k++] = a[v & 63]; v >>= 6; } while (v);
    for (int i = 0; i < k; i++) out[i] = tmp[k - 1 - i];
    out[k] = '\0';
}

static void gzip_to(const char *path, const char *text) {
    char cmd[1500];
    snprintf(cmd, sizeof cmd, "gzip -c > '%s'", path);
    FILE *p = popen(cmd, "w");
    if (!p) die(1, "popen gzip");
    fputs(text, p);
    if (pclose(p) != 0) die(1, "gzip failed");
}

/* The text of a corpus: train then val, headers skipped. */
static size_t corpus_text(const char *dir, const char *corpus, char *buf, size_t cap) {
    char path[1400];
    size_t n = 0;
    const char *splits[2] = {"train", "val"};
    for (int k = 0; k < 2; k++) {
        data_shard s;
        char err[2048];
        data_shard_path(path, sizeof path, dir, corpus, splits[k]);
        if (shard_open(&s, path, err, sizeof err) != 0) return 0;
        for (uint64_t i = 0; i < s.count && n < cap - 1; i++) buf[n++] = (char)shard_token(&s, i);
        shard_close(&s);
    }
    buf[n] = '\0';
    return n;
}

static void test_prepare_fake_root(void) {
    char root[1200], dir[1200], p[1400];
    snprintf(root, sizeof root, "%s", tmp_dir("fakeroot"));
    snprintf(dir, sizeof dir, "%s", tmp_dir("fakedata"));
    /* fortunes: two files, plus the .dat and .u8 files that must be skipped */
    snprintf(p, sizeof p, "%s/usr/share/games/fortunes", root);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/usr/share/games/fortunes/science", root);
    write_text(p, "Zeta fact.\n%\nSecond  \n  fortune.\n%\n");
    snprintf(p, sizeof p, "%s/usr/share/games/fortunes/art", root);
    write_text(p, "Alpha art.\n%\n");
    snprintf(p, sizeof p, "%s/usr/share/games/fortunes/art.dat", root);
    write_file(p, "\x01\x02\x03", 3);
    snprintf(p, sizeof p, "%s/usr/share/games/fortunes/art.u8", root);
    write_text(p, "u8 junk\n");
    /* foldoc: a dictzip is plain gzip; entries in the index in headword order */
    const char *meta = "00-database-short\n   Tiny\n\n";
    const char *e1 = "beta\n\n   The {second} letter.\n\n";
    const char *e2 = "alpha\n\n   The {first} letter.\n\n";
    char dict[512], index[1024], o1[16], l1[16], o2[16], l2[16], om[16], lm[16];
    snprintf(dict, sizeof dict, "%s%s%s", meta, e1, e2);
    b64_encode(0, om);
    b64_encode(strlen(meta), lm);
    b64_encode(strlen(meta), o1);
    b64_encode(strlen(e1), l1);
    b64_encode(strlen(meta) + strlen(e1), o2);
    b64_encode(strlen(e2), l2);
    snprintf(index, sizeof index, "00-database-short\t%s\t%s\n00-foldoc-short\t%s\t%s\nalpha\t%s\t%s\nb\t%s\t%s\nbeta\t%s\t%s\n",
             om, lm, om, lm, o2, l2, o1, l1, o1, l1);
    snprintf(p, sizeof p, "%s/usr/share/dictd", root);
    mkdir_p(p);
    snprintf(p, sizeof p, "%s/usr/share/dictd/foldoc.index", root);
    write_text(p, index);
    snprintf(p, sizeof p, "%s/usr/share/dictd/foldoc.dict.dz", root);
    gzip_to(p, dict);

    setenv("S2HC_DATA_ROOT", root, 1);
    CHECK(data_prepare(dir, "fortunes", 0, 0) == 0, "prepare fortunes");
    CHECK(data_prepare(dir, "foldoc", 0, 0) == 0, "prepare foldoc");
    static char text[4096];
    corpus_text(dir, "fortunes", text, sizeof text);
    const char *want_f = "Alpha art.\n\nZeta fact.\n\nSecond\n  fortune.\n\n";
    CHECK(strcmp(text, want_f) == 0, "fortunes text:\n%s", text);
    corpus_text(dir, "foldoc", text, sizeof text);
    const char *want_d = "beta\n\n   The second letter.\n\nalpha\n\n   The first letter.\n\n";
    CHECK(strcmp(text, want_d) == 0, "foldoc text:\n%s", text);
    static char src[8192];
    snprintf(p, sizeof p, "%s/fortunes/SOURCE.txt", dir);
    size_t n = read_file(p, src, sizeof src - 1);
    src[n] = '\0';
    CHECK(strstr(src, "cleanup-version: ") && strstr(src, "role: ood") && strstr(src, "source: fortunes"),
          "SOURCE.txt:\n%s", src);

    /* cached: the shards are not rewritten; --force rewrites them byte for byte. Its cost
       in CPU seconds, not wall ones: a loaded machine (or a disk busy with another job's
       writes) can hold a process for longer than the bound between two clock reads */
    char train[1400];
    data_shard_path(train, sizeof train, dir, "foldoc", "train");
    struct stat a, b;
    stat(train, &a);
    const clock_t c0 = clock();
    CHECK(data_prepare(dir, "foldoc", 0, 0) == 0, "cached prepare");
    const double cached_cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    CHECK(cached_cpu < 0.5, "cached prepare took %.3f CPU seconds", cached_cpu);
    stat(train, &b);
    CHECK(a.st_ino == b.st_ino && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec, "cached corpus was rewritten");
    static char again[4096];
    CHECK(data_prepare(dir, "foldoc", 1, 0) == 0, "forced prepare");
    corpus_text(dir, "foldoc", again, sizeof again);
    CHECK(strcmp(again, want_d) == 0, "forced rebuild differs");
    stat(train, &b);
    CHECK(a.st_ino != b.st_ino, "force did not rewrite");

    /* a stale cleanup version is rebuilt */
    snprintf(p, sizeof p, "%s/foldoc/SOURCE.txt", dir);
    write_text(p, "cleanup-version: old\n");
    stat(train, &a);
    CHECK(data_prepare(dir, "foldoc", 0, 0) == 0, "stale prepare");
    stat(train, &b);
    CHECK(a.st_ino != b.st_ino, "stale corpus was not rebuilt");
    unsetenv("S2HC_DATA_ROOT");
}

/* Run data_prepare with stderr captured into buf. */
static int prepare_capture(const char *dir, const char *only, char *buf, size_t cap) {
    char path[1400];
    snprintf(path, sizeof path, "%s/stderr.txt", tmp_dir("capture"));
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    int rc = data_prepare(dir, only, 0, 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n = read_file(path, buf, cap - 1);
    buf[n] = '\0';
    return rc;
}

static void test_prepare_missing(void) {
    char dir[1200], root[1200], msg[4096], p[1400];
    snprintf(root, sizeof root, "%s", tmp_dir("emptyroot"));
    snprintf(dir, sizeof dir, "%s/data", tmp_dir("missing"));
    setenv("S2HC_DATA_ROOT", root, 1);
    int rc = prepare_capture(dir, "kjv", msg, sizeof msg);
    CHECK(rc == 1, "missing package: rc %d", rc);
    CHECK(strstr(msg, "bible-kjv-text") && strstr(msg, "make deps"), "message: %s", msg);
    snprintf(p, sizeof p, "%s/kjv", dir);
    CHECK(!file_exists(p) && !file_exists(dir), "something was written for a missing package");
    rc = prepare_capture(dir, NULL, msg, sizeof msg);
    CHECK(rc == 1 && strstr(msg, "linux-doc-6.1") && strstr(msg, "dict-gcide") && strstr(msg, "manpages-dev"),
          "all missing: rc %d, %s", rc, msg);
    CHECK(!file_exists(dir), "something was written");
    rc = prepare_capture(dir, "nope", msg, sizeof msg);
    CHECK(rc == 1 && strstr(msg, "nope"), "unknown corpus: rc %d, %s", rc, msg);
    unsetenv("S2HC_DATA_ROOT");
}

static void test_data_main_usage(void) {
    char *a1[] = {"data"};
    char *a2[] = {"data", "bogus"};
    char *a3[] = {"data", "prepare", "--only", "nope"};
    char *a4[] = {"data", "prepare", "--frobnicate"};
    char *a5[] = {"data", "list", "--dir", (char *)tmp_dir("listdir")};
    fflush(stdout);
    int saved = dup(1), saved2 = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    int r1 = data_main(1, a1), r2 = data_main(2, a2), r3 = data_main(4, a3), r4 = data_main(3, a4),
        r5 = data_main(4, a5);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, 1);
    dup2(saved2, 2);
    close(null);
    close(saved);
    close(saved2);
    CHECK(r1 == 2 && r2 == 2 && r3 == 2 && r4 == 2, "usage errors: %d %d %d %d", r1, r2, r3, r4);
    CHECK(r5 == 0, "list: %d", r5);
    CHECK(strcmp(data_corpus_role("docs"), "train") == 0 && strcmp(data_corpus_role("kjv"), "ood") == 0 &&
              data_corpus_role("x") == NULL,
          "roles");
    int n = 0;
    while (data_corpora[n]) n++;
    CHECK(n == 7 && strcmp(data_corpora[0], "docs") == 0 && strcmp(data_corpora[6], "kjv") == 0, "corpora list");
    char buf[256];
    data_shard_path(buf, sizeof buf, "data", "kjv", "val");
    CHECK(strcmp(buf, "data/kjv/val.bin") == 0, "%s", buf);
}

int main(void) {
    T_NAME("test_data");
    T_RUN(test_shard_roundtrip_u8);
    T_RUN(test_shard_roundtrip_u16);
    T_RUN(test_shard_corrupt);
    T_RUN(test_write_long_path);
    T_RUN(test_write_files);
    T_RUN(test_write_tmp_held);
    T_RUN(test_shard_vocab);
    T_RUN(test_shard_fifo);
    T_RUN(test_loader_determinism);
    T_RUN(test_loader_range);
    T_RUN(test_eval_windows);
    T_RUN(test_b64);
    T_RUN(test_gcide_clean);
    T_RUN(test_kjv_refs);
    T_RUN(test_info_clean);
    T_RUN(test_small_rules);
    T_RUN(test_prepare_fake_root);
    T_RUN(test_prepare_missing);
    T_RUN(test_data_main_usage);
    return T_END();
}
