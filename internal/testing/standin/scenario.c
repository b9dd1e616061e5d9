/* Scenario parsing and evaluation for the GB10 stand-in library. Pure: no
 * clock, no files, no globals written, so that it can be fuzzed through cgo.
 * Format: docs/standin-nvml.md. */
#include "scenario.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bit i of NVML's clocks event reasons mask is sc_reason_names[i]. */
const char *const sc_reason_names[] = {
	"gpu_idle",
	"applications_clocks_setting",
	"sw_power_cap",
	"hw_slowdown",
	"sync_boost",
	"sw_thermal_slowdown",
	"hw_thermal_slowdown",
	"hw_power_brake_slowdown",
	"display_clock_setting",
};
const int sc_nreason_names = sizeof sc_reason_names / sizeof sc_reason_names[0];

static const char *const field_names[SC_NFIELDS] = {
	[SC_TEMPERATURE] = "temperature",
	[SC_POWER] = "power",
	[SC_ENERGY] = "energy",
	[SC_SM_CLOCK] = "sm_clock",
	[SC_UTILIZATION] = "utilization",
	[SC_REASONS] = "clocks_event_reasons",
	[SC_PROCESSES] = "processes",
	[SC_COUNTERS] = "clocks_event_counters",
	[SC_MARGIN] = "temperature_margin",
	[SC_PSTATE] = "performance_state",
};

/* The reason bits with an NVML counter, by field id (nvml.h). */
static const struct { unsigned int field; int bit; } counters[] = {
	{74, 2},  /* sw_power_cap */
	{76, 4},  /* sync_boost */
	{269, 5}, /* sw_thermal_slowdown */
	{270, 6}, /* hw_thermal_slowdown */
	{271, 7}, /* hw_power_brake_slowdown */
};

/* Bits a GB10 reports in its flags: gpu_idle, applications_clocks_setting,
 * display_clock_setting. Its slowdown flags read Not Active while the
 * driver slows the clocks (nvidia-smi -q at 81 C, driver 580.95.05:
 * ollama/ollama#13552). */
#define GB10_REPORTED_FLAGS ((1ULL << 0) | (1ULL << 1) | (1ULL << 8))

/* Values a device shows before its timeline says otherwise: a GB10 at
 * rest, as `nvidia-smi` prints it (36-42 C, a few watts, P8). */
static const struct sc_point idle = {
	.gpu = -1, .t = 0, .temp = 40, .power = 4.5, .sm = 208, .util = 0, .reasons = 1 /* gpu_idle */,
	.share = {1}, .pstate = 8,
};

/* Bounds that keep every value a real device could report and keep the
 * arithmetic finite. */
#define MAX_SECONDS 1e7 /* 115 days */
#define MAX_BYTES (1ULL << 50)

void sc_defaults(struct scenario *sc)
{
	memset(sc, 0, sizeof *sc);
	snprintf(sc->name, sizeof sc->name, "NVIDIA GB10");
	snprintf(sc->driver, sizeof sc->driver, "580.95.05");
	sc->cuda = 13000;
	sc->cc_major = 12;
	sc->cc_minor = 1;
	sc->devices = 1;
	sc->sm_max = 3003;
	sc->speed = 1;
	sc->hang_for = -1;
	/* 81 C with 13 C of margin (GPU T.Limit Temp): ollama/ollama#13552. */
	sc->temp_limit = 94;
}

/* ---- parsing ---------------------------------------------------------- */

struct parser {
	int line;
	char *err;
	size_t errlen;
	int section; /* gpu N: lines after it belong to device N; -1 before any */
};

static int fail(struct parser *p, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (p->errlen > 0)
		snprintf(p->err, p->errlen, "line %d: %s", p->line, msg);
	return -1;
}

/* number reads a finite decimal number filling the whole token. */
static int number(const char *s, double *out)
{
	char *end;
	if (*s == '\0' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v))
		return -1;
	/* strtod also reads hex floats and "infinity"; a scenario is decimal. */
	for (const char *c = s; c < end; c++)
		if (!(isdigit((unsigned char)*c) || *c == '.' || *c == '-' || *c == '+' || *c == 'e' || *c == 'E'))
			return -1;
	*out = v;
	return 0;
}

static int whole(const char *s, long min, long max, long *out)
{
	double v;
	if (number(s, &v) < 0 || v != floor(v) || v < min || v > max)
		return -1;
	*out = (long)v;
	return 0;
}

int sc_parse_duration(const char *s, double *seconds)
{
	double total = 0;
	int parts = 0;
	while (*s) {
		char *end;
		if (!isdigit((unsigned char)*s) && *s != '.')
			return -1;
		errno = 0;
		double v = strtod(s, &end);
		if (errno != 0 || end == s || !isfinite(v))
			return -1;
		for (const char *c = s; c < end; c++)
			if (!isdigit((unsigned char)*c) && *c != '.')
				return -1;
		double unit = 1;
		switch (*end) {
		case 'h': unit = 3600; end++; break;
		case 'm': unit = 60; end++; break;
		case 's': unit = 1; end++; break;
		case '\0': if (parts > 0) return -1; break; /* a bare number only alone */
		default: return -1;
		}
		total += v * unit;
		parts++;
		s = end;
	}
	if (parts == 0 || !(total >= 0 && total <= MAX_SECONDS))
		return -1;
	*seconds = total;
	return 0;
}

/* bytes reads 123456, 512KiB, 12MiB, 80GiB or 1TiB. */
static int bytes(const char *s, unsigned long long *out)
{
	static const struct { const char *suffix; double mult; } units[] = {
		{"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"B", 1}, {"", 1},
	};
	size_t n = strlen(s);
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t k = strlen(units[i].suffix);
		if (n <= k || strcmp(s + n - k, units[i].suffix) != 0)
			continue;
		char num[64];
		if (n - k >= sizeof num)
			return -1;
		memcpy(num, s, n - k);
		num[n - k] = '\0';
		double v;
		if (number(num, &v) < 0 || v < 0)
			return -1;
		v *= units[i].mult;
		if (v > (double)MAX_BYTES || v != floor(v))
			return -1;
		*out = (unsigned long long)v;
		return 0;
	}
	return -1;
}

/* reasons reads a comma list of reasons, each with an optional :SHARE of
 * the time it holds the clocks (0-1, default 1), or none. */
static int reasons(const char *s, unsigned long long *out, double share[SC_NREASONS])
{
	unsigned long long mask = 0;
	for (int i = 0; i < SC_NREASONS; i++)
		share[i] = 0;
	if (strcmp(s, "none") == 0) {
		*out = 0;
		return 0;
	}
	while (*s) {
		const char *comma = strchr(s, ',');
		size_t n = comma ? (size_t)(comma - s) : strlen(s);
		const char *colon = memchr(s, ':', n);
		size_t name = colon ? (size_t)(colon - s) : n;
		double x = 1;
		if (colon) {
			char num[32];
			size_t k = n - name - 1;
			if (k == 0 || k >= sizeof num)
				return -1;
			memcpy(num, colon + 1, k);
			num[k] = '\0';
			if (number(num, &x) < 0 || !(x > 0 && x <= 1))
				return -1;
		}
		int found = -1;
		for (int i = 0; i < sc_nreason_names; i++)
			if (strlen(sc_reason_names[i]) == name && strncmp(s, sc_reason_names[i], name) == 0)
				found = i;
		if (found < 0)
			return -1;
		mask |= 1ULL << found;
		share[found] = x;
		s += n;
		if (comma) {
			s++;
			if (*s == '\0')
				return -1;
		}
	}
	*out = mask;
	return 0;
}

/* keyval splits key=value in place; it returns the value or NULL. */
static char *keyval(char *tok)
{
	char *eq = strchr(tok, '=');
	if (!eq || eq == tok)
		return NULL;
	*eq = '\0';
	return eq + 1;
}

static int printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

/* last_point is the latest point of the timeline of device gpu (-1: the
 * shared one), or NULL. */
static const struct sc_point *last_point(const struct scenario *sc, int gpu)
{
	for (int i = sc->npoints - 1; i >= 0; i--)
		if (sc->points[i].gpu == gpu)
			return &sc->points[i];
	return NULL;
}

static int parse_at(struct parser *p, struct scenario *sc, char **tok, int ntok)
{
	if (ntok < 2)
		return fail(p, "at needs a time");
	if (sc->npoints >= SC_MAX_POINTS)
		return fail(p, "more than %d timeline points", SC_MAX_POINTS);
	struct sc_point pt;
	const struct sc_point *prev = last_point(sc, p->section);
	pt = prev ? *prev : idle;
	pt.gpu = p->section;
	if (sc_parse_duration(tok[1], &pt.t) < 0)
		return fail(p, "bad time %s (use 90, 90s, 15m or 1h30m)", tok[1]);
	if (prev && pt.t <= prev->t)
		return fail(p, "time %s is not after the previous point of this timeline", tok[1]);
	for (int i = 2; i < ntok; i++) {
		char *v = keyval(tok[i]);
		if (!v)
			return fail(p, "expected key=value, got %s", tok[i]);
		double x;
		if (strcmp(tok[i], "reasons") == 0) {
			if (reasons(v, &pt.reasons, pt.share) < 0)
				return fail(p, "bad reasons %s (a comma list of NVML clock event reasons, each with an optional :SHARE in (0, 1], or none)", v);
			continue;
		}
		if (strcmp(tok[i], "pstate") == 0) {
			long n;
			if (whole(v, 0, 15, &n) < 0)
				return fail(p, "pstate %s out of 0..15", v);
			pt.pstate = (int)n;
			continue;
		}
		if (number(v, &x) < 0)
			return fail(p, "bad number %s for %s", v, tok[i]);
		if (strcmp(tok[i], "temp") == 0) {
			if (x < 0 || x > 200)
				return fail(p, "temp %s out of 0..200", v);
			pt.temp = x;
		} else if (strcmp(tok[i], "power") == 0) {
			if (x < 0 || x > 10000)
				return fail(p, "power %s out of 0..10000", v);
			pt.power = x;
		} else if (strcmp(tok[i], "sm") == 0) {
			if (x < 0 || x > 10000)
				return fail(p, "sm %s out of 0..10000", v);
			pt.sm = x;
		} else if (strcmp(tok[i], "util") == 0) {
			if (x < 0 || x > 100)
				return fail(p, "util %s out of 0..100", v);
			pt.util = x;
		} else {
			return fail(p, "unknown key %s (temp, power, sm, util, reasons, pstate)", tok[i]);
		}
	}
	sc->points[sc->npoints++] = pt;
	return 0;
}

static int parse_process(struct parser *p, struct scenario *sc, char **tok, int ntok)
{
	if (sc->nprocs >= SC_MAX_PROCS)
		return fail(p, "more than %d processes", SC_MAX_PROCS);
	struct sc_proc pr = {.gpu = p->section < 0 ? 0 : p->section, .from = 0, .to = INFINITY};
	int have_pid = 0, have_used = 0;
	for (int i = 1; i < ntok; i++) {
		char *v = keyval(tok[i]);
		if (!v)
			return fail(p, "expected key=value, got %s", tok[i]);
		if (strcmp(tok[i], "pid") == 0) {
			long pid;
			if (whole(v, 1, 4194304, &pid) < 0)
				return fail(p, "bad pid %s", v);
			pr.pid = (unsigned int)pid;
			have_pid = 1;
		} else if (strcmp(tok[i], "used") == 0) {
			if (bytes(v, &pr.used) < 0)
				return fail(p, "bad size %s (use 12GiB, 512MiB or bytes)", v);
			have_used = 1;
		} else if (strcmp(tok[i], "from") == 0) {
			if (sc_parse_duration(v, &pr.from) < 0)
				return fail(p, "bad time %s", v);
		} else if (strcmp(tok[i], "to") == 0) {
			if (sc_parse_duration(v, &pr.to) < 0)
				return fail(p, "bad time %s", v);
		} else {
			return fail(p, "unknown key %s (pid, used, from, to)", tok[i]);
		}
	}
	if (!have_pid || !have_used)
		return fail(p, "process needs pid= and used=");
	if (pr.to <= pr.from)
		return fail(p, "process ends before it starts");
	sc->procs[sc->nprocs++] = pr;
	return 0;
}

static int path_arg(struct parser *p, char *dst, const char *src)
{
	if (strlen(src) >= SC_PATH_MAX)
		return fail(p, "path longer than %d bytes", SC_PATH_MAX - 1);
	snprintf(dst, SC_PATH_MAX, "%s", src);
	return 0;
}

static int parse_line(struct parser *p, struct scenario *sc, char *line)
{
	char *hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	char *tok[40];
	int ntok = 0;
	for (char *s = line; *s;) {
		while (*s == ' ' || *s == '\t' || *s == '\r')
			*s++ = '\0';
		if (!*s)
			break;
		if (ntok == (int)(sizeof tok / sizeof tok[0]))
			return fail(p, "too many words");
		tok[ntok++] = s;
		while (*s && *s != ' ' && *s != '\t' && *s != '\r')
			s++;
	}
	if (ntok == 0)
		return 0;
	const char *d = tok[0];
	long n;
	double x;

	if (strcmp(d, "name") == 0) {
		/* The name is every word after the directive, single-spaced. */
		if (ntok < 2)
			return fail(p, "name needs a value");
		size_t len = 0;
		char buf[SC_TEXT_MAX];
		for (int i = 1; i < ntok; i++) {
			size_t k = strlen(tok[i]);
			if (len + k + 1 >= sizeof buf)
				return fail(p, "name longer than %d bytes", SC_TEXT_MAX - 1);
			if (i > 1)
				buf[len++] = ' ';
			memcpy(buf + len, tok[i], k);
			len += k;
		}
		buf[len] = '\0';
		if (!printable(buf))
			return fail(p, "name must be printable ASCII");
		memcpy(sc->name, buf, len + 1);
		return 0;
	}
	if (p->section >= 0 && strcmp(d, "at") != 0 && strcmp(d, "process") != 0 && strcmp(d, "gpu") != 0)
		return fail(p, "%s belongs before the first gpu section", d);
	if (strcmp(d, "at") == 0)
		return parse_at(p, sc, tok, ntok);
	if (strcmp(d, "process") == 0)
		return parse_process(p, sc, tok, ntok);
	if (strcmp(d, "unsupported") == 0) {
		if (ntok < 2)
			return fail(p, "unsupported needs field names");
		for (int i = 1; i < ntok; i++) {
			int found = -1;
			for (int f = 0; f < SC_NFIELDS; f++)
				if (strcmp(tok[i], field_names[f]) == 0)
					found = f;
			if (found < 0)
				return fail(p, "unknown field %s", tok[i]);
			sc->unsupported[found] = 1;
		}
		return 0;
	}
	if (ntok == 1)
		return fail(p, "%s needs a value", d);
	if (strcmp(d, "init_fail") == 0) {
		if (strcmp(tok[1], "always") == 0 && ntok == 2) {
			sc->init_fail = 1;
			return 0;
		}
		if (strcmp(tok[1], "file") == 0 && ntok == 3)
			return path_arg(p, sc->init_fail_file, tok[2]);
		return fail(p, "init_fail takes 'always' or 'file PATH'");
	}
	if (strcmp(d, "hang") == 0) {
		if (strcmp(tok[1], "file") == 0 && ntok == 3)
			return path_arg(p, sc->hang_file, tok[2]);
		if (strcmp(tok[1], "after") == 0 && (ntok == 3 || (ntok == 5 && strcmp(tok[3], "for") == 0))) {
			if (sc_parse_duration(tok[2], &sc->hang_after) < 0)
				return fail(p, "bad time %s", tok[2]);
			sc->hang_for = -1;
			if (ntok == 5 && (sc_parse_duration(tok[4], &sc->hang_for) < 0 || sc->hang_for <= 0))
				return fail(p, "bad duration %s", tok[4]);
			sc->hang_timed = 1;
			return 0;
		}
		return fail(p, "hang takes 'after TIME [for DURATION]' or 'file PATH'");
	}
	if (strcmp(d, "lost") == 0) {
		if (strcmp(tok[1], "file") == 0 && ntok == 3)
			return path_arg(p, sc->lost_file, tok[2]);
		return fail(p, "lost takes 'file PATH'");
	}
	if (ntok != 2)
		return fail(p, "%s takes one value", d);
	const char *v = tok[1];
	if (strcmp(d, "gpu") == 0) {
		if (whole(v, 0, SC_MAX_DEVICES - 1, &n) < 0)
			return fail(p, "gpu index %s out of 0..%d", v, SC_MAX_DEVICES - 1);
		p->section = (int)n;
	} else if (strcmp(d, "devices") == 0) {
		if (whole(v, 0, SC_MAX_DEVICES, &n) < 0)
			return fail(p, "devices %s out of 0..%d", v, SC_MAX_DEVICES);
		sc->devices = (int)n;
	} else if (strcmp(d, "driver") == 0) {
		if (strlen(v) >= SC_TEXT_MAX || !printable(v))
			return fail(p, "bad driver version");
		snprintf(sc->driver, sizeof sc->driver, "%s", v);
	} else if (strcmp(d, "cuda") == 0 || strcmp(d, "compute_capability") == 0) {
		long major, minor;
		char buf[16];
		char *dot;
		if (strlen(v) >= sizeof buf)
			return fail(p, "bad version %s (use 13.0)", v);
		snprintf(buf, sizeof buf, "%s", v);
		dot = strchr(buf, '.');
		if (!dot)
			return fail(p, "bad version %s (use 13.0)", v);
		*dot = '\0';
		if (whole(buf, 1, 99, &major) < 0 || whole(dot + 1, 0, 9, &minor) < 0)
			return fail(p, "bad version %s (use 13.0)", v);
		if (d[0] == 'c' && d[1] == 'u') {
			sc->cuda = (int)(major * 1000 + minor * 10);
		} else {
			sc->cc_major = (int)major;
			sc->cc_minor = (int)minor;
		}
	} else if (strcmp(d, "sm_clock_max") == 0) {
		if (whole(v, 1, 10000, &n) < 0)
			return fail(p, "sm_clock_max %s out of 1..10000 MHz", v);
		sc->sm_max = (unsigned int)n;
	} else if (strcmp(d, "memory_total") == 0) {
		if (bytes(v, &sc->memory_total) < 0 || sc->memory_total == 0)
			return fail(p, "bad size %s", v);
	} else if (strcmp(d, "power_limit") == 0) {
		if (number(v, &x) < 0 || !(x > 0 && x <= 10000))
			return fail(p, "power_limit %s out of (0, 10000] W", v);
		sc->power_limit = x;
	} else if (strcmp(d, "temperature_limit") == 0) {
		if (number(v, &x) < 0 || !(x > 0 && x <= 200))
			return fail(p, "temperature_limit %s out of (0, 200] C", v);
		sc->temp_limit = x;
	} else if (strcmp(d, "clocks_event_flags") == 0) {
		if (strcmp(v, "clear") == 0)
			sc->flags_reported = 0;
		else if (strcmp(v, "reported") == 0)
			sc->flags_reported = 1;
		else
			return fail(p, "clocks_event_flags takes clear (GB10) or reported");
	} else if (strcmp(d, "speed") == 0) {
		if (number(v, &x) < 0 || !(x > 0 && x <= 1e6))
			return fail(p, "speed %s out of (0, 1e6]", v);
		sc->speed = x;
	} else if (strcmp(d, "freeze") == 0) {
		if (sc_parse_duration(v, &sc->freeze) < 0)
			return fail(p, "bad time %s", v);
		sc->frozen = 1;
	} else {
		return fail(p, "unknown directive %s", d);
	}
	return 0;
}

int sc_parse(const char *text, size_t len, struct scenario *sc, char *err, size_t errlen)
{
	struct parser p = {.line = 0, .err = err, .errlen = errlen, .section = -1};
	char line[1024];
	size_t i = 0;
	if (errlen > 0)
		err[0] = '\0';
	if (len > SC_FILE_MAX)
		return fail(&p, "scenario larger than %d bytes", SC_FILE_MAX);
	while (i < len) {
		size_t n = 0;
		p.line++;
		while (i < len && text[i] != '\n') {
			if (text[i] == '\0')
				return fail(&p, "NUL byte");
			if (n + 1 >= sizeof line)
				return fail(&p, "line longer than %zu bytes", sizeof line - 1);
			line[n++] = text[i++];
		}
		line[n] = '\0';
		i++; /* the newline */
		if (parse_line(&p, sc, line) < 0)
			return -1;
	}
	for (int k = 0; k < sc->npoints; k++)
		if (sc->points[k].gpu >= sc->devices)
			return fail(&p, "a timeline for gpu %d, but only %d devices", sc->points[k].gpu, sc->devices);
	for (int k = 0; k < sc->nprocs; k++)
		if (sc->procs[k].gpu >= sc->devices && sc->devices > 0)
			return fail(&p, "a process on gpu %d, but only %d devices", sc->procs[k].gpu, sc->devices);
	return 0;
}

/* ---- evaluation ------------------------------------------------------- */

/* timeline is the gpu that owns device gpu's points: gpu itself if it has
 * any, else -1 (the shared timeline). */
static int timeline(const struct scenario *sc, int gpu)
{
	for (int i = 0; i < sc->npoints; i++)
		if (sc->points[i].gpu == gpu)
			return gpu;
	return -1;
}

void sc_state(const struct scenario *sc, int gpu, double t, struct sc_point *out)
{
	int owner = timeline(sc, gpu);
	const struct sc_point *prev = NULL, *next = NULL;
	for (int i = 0; i < sc->npoints; i++) {
		const struct sc_point *pt = &sc->points[i];
		if (pt->gpu != owner)
			continue;
		if (pt->t <= t) {
			prev = pt;
		} else {
			next = pt;
			break;
		}
	}
	if (!prev && !next)
		*out = idle;
	else if (!prev)
		*out = *next;
	else if (!next)
		*out = *prev;
	else {
		double f = (t - prev->t) / (next->t - prev->t);
		*out = *prev;
		out->temp = prev->temp + f * (next->temp - prev->temp);
		out->power = prev->power + f * (next->power - prev->power);
		out->sm = prev->sm + f * (next->sm - prev->sm);
		out->util = prev->util + f * (next->util - prev->util);
	}
	out->gpu = gpu;
	out->t = t;
}

double sc_energy(const struct scenario *sc, int gpu, double t)
{
	/* Power is linear between points and constant outside them, so the
	 * trapezoid rule over the points inside (0, t) is exact. */
	int owner = timeline(sc, gpu);
	struct sc_point at;
	double joules = 0, last_t = 0, last_p;
	sc_state(sc, gpu, 0, &at);
	last_p = at.power;
	for (int i = 0; i < sc->npoints; i++) {
		const struct sc_point *pt = &sc->points[i];
		if (pt->gpu != owner || pt->t <= 0)
			continue;
		if (pt->t >= t)
			break;
		joules += (last_p + pt->power) / 2 * (pt->t - last_t);
		last_t = pt->t;
		last_p = pt->power;
	}
	if (t > last_t) {
		sc_state(sc, gpu, t, &at);
		joules += (last_p + at.power) / 2 * (t - last_t);
	}
	return joules;
}

int sc_procs(const struct scenario *sc, int gpu, double t, struct sc_proc *out, int max)
{
	int n = 0;
	for (int i = 0; i < sc->nprocs; i++) {
		const struct sc_proc *pr = &sc->procs[i];
		if (pr->gpu != gpu || t < pr->from || t >= pr->to)
			continue;
		if (n < max)
			out[n] = *pr;
		n++;
	}
	return n;
}

unsigned long long sc_flags(const struct scenario *sc, const struct sc_point *st)
{
	return sc->flags_reported ? st->reasons : st->reasons & GB10_REPORTED_FLAGS;
}

int sc_counter_bit(unsigned int field_id)
{
	for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
		if (counters[i].field == field_id)
			return counters[i].bit;
	return -1;
}

double sc_event_seconds(const struct scenario *sc, int gpu, int bit, double t)
{
	/* Shares hold from their point to the next (the first also before
	 * it), so the integral is a sum over the segments. */
	if (bit < 0 || bit >= SC_NREASONS || !(t > 0))
		return 0;
	int owner = timeline(sc, gpu);
	const struct sc_point *held = NULL;
	double secs = 0, from = 0;
	for (int i = 0; i < sc->npoints; i++) {
		const struct sc_point *pt = &sc->points[i];
		if (pt->gpu != owner)
			continue;
		if (held && pt->t >= t)
			break;
		if (held && pt->t > from) {
			secs += held->share[bit] * (pt->t - from);
			from = pt->t;
		}
		held = pt;
	}
	if (!held)
		held = &idle;
	if (t > from)
		secs += held->share[bit] * (t - from);
	return secs;
}
