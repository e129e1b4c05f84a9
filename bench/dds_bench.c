/* The net benchmarks' traffic over Cyclone DDS, what a ROS 2 user would send
 * it over: one writer process, one reader process, reliable KEEP_LAST 1
 * topics, unicast to the peer.
 *
 *   rtaccel-dds-bench overhead [--sizes LIST] [--samples N]
 *       one sample at a time, sizes as rtaccel-net-bench overhead: one-way
 *       latency from dds_write to the reader holding the sample, over
 *       loopback
 *   rtaccel-dds-bench roundtrip [--sizes LIST] [--samples N] [--rate R]
 *       a sample out and a small reply back between the two namespaces of
 *       the priority benchmark: the round trip a remote accelerator client
 *       over DDS pays, timed at the writer
 *   rtaccel-dds-bench priority [--sizes LIST] [--rate R]
 *       a high-priority topic under three lower ones that write back to
 *       back, all of one size, over the rate-limited veth of
 *       rtaccel-net-bench priority; transport_priority set as a ROS 2 user
 *       would set it
 *
 * Each prints one JSON object (dds_p50_us ... per size). Exit 0; 77 when it
 * cannot run here, with the reason. */
#include <dds/dds.h>
#include <dds/version.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/percentile.h"
#include "dds_blob.h"
#include "net_common.h"

#define SEC 1000000000ll
#define MAX_SAMPLES 1000
#define FLOWS 4
#define HIGH_SAMPLES 20

static void die(const char *what, dds_return_t rc)
{
	fprintf(stderr, "rtaccel-dds-bench: %s: %s\n", what, dds_strretcode(rc));
	exit(1);
}

static double pct(uint64_t *v, int n, double p)
{
	rtaccel_sort_u64(v, (size_t)n);
	return (double)rtaccel_percentile_sorted_u64(v, (size_t)n, p / 100.0) / 1000.0;
}

/* Unicast between this process and its peer, over the given interface. */
static void configure(const char *self, const char *peer)
{
	char xml[1024];
	snprintf(xml, sizeof(xml),
		 "<CycloneDDS><Domain id=\"any\"><General><Interfaces>"
		 "<NetworkInterface address=\"%s\"/></Interfaces><AllowMulticast>false</AllowMulticast>"
		 "</General><Discovery><ParticipantIndex>auto</ParticipantIndex><Peers>"
		 "<Peer address=\"%s\"/></Peers></Discovery></Domain></CycloneDDS>",
		 self, peer);
	setenv("CYCLONEDDS_URI", xml, 1);
}

struct endpoint {
	dds_entity_t participant, topic[FLOWS + 1];
};

/* Topics 0..FLOWS-1 carry the flows, topic FLOWS the reader's replies. */
static void open_topics(struct endpoint *e)
{
	e->participant = dds_create_participant(DDS_DOMAIN_DEFAULT, NULL, NULL);
	if (e->participant < 0)
		die("participant", e->participant);
	for (int i = 0; i <= FLOWS; i++) {
		char name[32];
		snprintf(name, sizeof(name), i < FLOWS ? "rtaccel_flow%d" : "rtaccel_reply", i);
		e->topic[i] = dds_create_topic(e->participant, &rtaccel_bench_Blob_desc, name, NULL, NULL);
		if (e->topic[i] < 0)
			die("topic", e->topic[i]);
	}
}

static dds_qos_t *qos_for(int priority)
{
	dds_qos_t *q = dds_create_qos();
	dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_SECS(30));
	dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 1);
	dds_qset_transport_priority(q, priority);
	return q;
}

static void wait_matched(dds_entity_t writer)
{
	for (int i = 0; i < 2000; i++) {
		dds_publication_matched_status_t st;
		if (dds_get_publication_matched_status(writer, &st) == 0 && st.current_count > 0)
			return;
		dds_sleepfor(DDS_MSECS(5));
	}
	fprintf(stderr, "rtaccel-dds-bench: the reader did not appear\n");
	exit(1);
}

/* Takes the next sample of READER into *SAMPLE (a loan), waiting on WS. */
static bool take_one(dds_entity_t reader, dds_entity_t ws, void **sample)
{
	for (;;) {
		dds_sample_info_t info;
		*sample = NULL;
		dds_return_t n = dds_take(reader, sample, &info, 1, 1);
		if (n < 0)
			die("take", n);
		if (n == 1 && info.valid_data)
			return true;
		if (n == 1)
			dds_return_loan(reader, sample, 1);
		if (dds_waitset_wait(ws, NULL, 0, DDS_SECS(30)) == 0)
			return false;
	}
}

/* The reader process: takes the samples of the flows it is told to read
 * and replies to each sample of flow 0 with its latency. Others are taken
 * and dropped, as fast as they come. */
static void reader_main(int flows)
{
	struct endpoint e;
	open_topics(&e);
	dds_qos_t *q = qos_for(0);
	dds_entity_t ws = dds_create_waitset(e.participant);
	dds_entity_t readers[FLOWS];
	for (int f = 0; f < flows; f++) {
		readers[f] = dds_create_reader(e.participant, e.topic[f], q, NULL);
		dds_entity_t rc = dds_create_readcondition(readers[f], DDS_ANY_STATE);
		dds_waitset_attach(ws, rc, f);
	}
	dds_entity_t reply = dds_create_writer(e.participant, e.topic[FLOWS], q, NULL);
	wait_matched(reply);
	for (;;) {
		dds_attach_t which[FLOWS];
		dds_return_t n = dds_waitset_wait(ws, which, FLOWS, DDS_SECS(60));
		if (n <= 0)
			exit(0);
		for (int f = 0; f < flows; f++) {
			void *sample = NULL;
			dds_sample_info_t info;
			while (dds_take(readers[f], &sample, &info, 1, 1) == 1) {
				rtaccel_bench_Blob *b = sample;
				if (info.valid_data && f == 0) {
					uint64_t lat = rtaccel_monotonic_ns() - b->stamp_ns;
					rtaccel_bench_Blob r = {.seq = b->seq, .stamp_ns = lat};
					dds_write(reply, &r);
				}
				dds_return_loan(readers[f], &sample, 1);
				sample = NULL;
			}
		}
	}
}

struct writer_side {
	struct endpoint e;
	dds_entity_t writer[FLOWS], reply_reader, reply_ws;
};

static void writer_open(struct writer_side *w, int flows)
{
	open_topics(&w->e);
	for (int f = 0; f < flows; f++) {
		dds_qos_t *q = qos_for(f == 0 ? 100 : FLOWS - f);
		w->writer[f] = dds_create_writer(w->e.participant, w->e.topic[f], q, NULL);
		dds_delete_qos(q);
		wait_matched(w->writer[f]);
	}
	dds_qos_t *q = qos_for(0);
	w->reply_reader = dds_create_reader(w->e.participant, w->e.topic[FLOWS], q, NULL);
	w->reply_ws = dds_create_waitset(w->e.participant);
	dds_waitset_attach(w->reply_ws, dds_create_readcondition(w->reply_reader, DDS_ANY_STATE), 0);
	dds_sleepfor(DDS_MSECS(300)); /* the reply writer's match the other way */
}

/* Writes one sample of SIZE on flow 0 and waits for the reader's reply:
 * the one-way latency it measured. */
static uint64_t round_once(struct writer_side *w, uint8_t *data, uint64_t size, uint64_t seq)
{
	rtaccel_bench_Blob b = {.seq = seq, .stamp_ns = rtaccel_monotonic_ns()};
	b.data._buffer = data;
	b.data._length = b.data._maximum = (uint32_t)size;
	dds_return_t rc = dds_write(w->writer[0], &b);
	if (rc < 0)
		die("write", rc);
	for (;;) {
		void *sample;
		if (!take_one(w->reply_reader, w->reply_ws, &sample)) {
			fprintf(stderr, "rtaccel-dds-bench: no reply in 30 s\n");
			exit(1);
		}
		rtaccel_bench_Blob *r = sample;
		uint64_t got = r->seq, lat = r->stamp_ns;
		dds_return_loan(w->reply_reader, &sample, 1);
		if (got == seq)
			return lat;
	}
}

static pid_t spawn_reader(int flows, const char *self, const char *peer)
{
	pid_t child = fork();
	if (child == 0) {
		bench_enter_ns(bench_ns_b);
		configure(self, peer);
		reader_main(flows);
		_exit(0);
	}
	return child;
}

static int overhead(uint64_t *sizes, int nsizes, int max_samples)
{
	pid_t child = spawn_reader(1, "127.0.0.1", "127.0.0.1");
	configure("127.0.0.1", "127.0.0.1");
	struct writer_side w;
	writer_open(&w, 1);
	uint8_t *data = calloc(1, 64u << 20);
	static uint64_t lat[MAX_SAMPLES];
	uint64_t seq = 0;
	printf("{\"middleware\": \"cyclonedds %s\", \"transport\": \"udp loopback\", \"sizes\": [",
	       DDS_VERSION);
	for (int s = 0; s < nsizes; s++) {
		int n = (int)((1024ull << 20) / sizes[s]);
		n = n < 20 ? 20 : n > max_samples ? max_samples : n;
		for (int i = 0; i < n + 2; i++) {
			uint64_t l = round_once(&w, data, sizes[s], ++seq);
			if (i >= 2)
				lat[i - 2] = l;
		}
		printf("%s\n  {\"size\": %llu, \"samples\": %d, \"dds_p50_us\": %.1f, \"dds_p90_us\": %.1f}",
		       s ? "," : "", (unsigned long long)sizes[s], n, pct(lat, n, 50), pct(lat, n, 90));
		fflush(stdout);
	}
	printf("\n]}\n");
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
	dds_delete(w.e.participant);
	return 0;
}

/* The background flows: writers in threads of the writer process. */
struct background {
	dds_entity_t writer;
	uint8_t *data;
	uint64_t size;
	volatile bool *on;
	pthread_t t;
};

static void *write_loop(void *arg)
{
	struct background *b = arg;
	rtaccel_bench_Blob s = {0};
	s.data._buffer = b->data;
	s.data._length = s.data._maximum = (uint32_t)b->size;
	while (*b->on) {
		s.stamp_ns = rtaccel_monotonic_ns();
		s.seq++;
		if (dds_write(b->writer, &s) < 0)
			break;
	}
	return NULL;
}

static int priority(uint64_t *sizes, int nsizes, const char *rate)
{
	const char *why = bench_link_up(rate);
	if (why) {
		printf("rtaccel-dds-bench: skipped: %s\n", why);
		return 77;
	}
	pid_t child = spawn_reader(FLOWS, BENCH_NS_B_ADDR, BENCH_NS_A_ADDR);
	bench_enter_ns(bench_ns_a);
	configure(BENCH_NS_A_ADDR, BENCH_NS_B_ADDR);
	struct writer_side w;
	writer_open(&w, FLOWS);
	uint8_t *data = calloc(1, 64u << 20);
	static uint64_t lat[HIGH_SAMPLES];
	uint64_t seq = 0;
	unsigned seed = 1;
	printf("{\"middleware\": \"cyclonedds %s\", \"transport\": \"udp\", \"link_rate\": \"%s\", "
	       "\"samples\": %d, \"sizes\": [",
	       DDS_VERSION, rate, HIGH_SAMPLES);
	for (int s = 0; s < nsizes; s++) {
		for (int i = 0; i < HIGH_SAMPLES + 1; i++) {
			uint64_t l = round_once(&w, data, sizes[s], ++seq);
			if (i)
				lat[i - 1] = l;
		}
		double solo = pct(lat, HIGH_SAMPLES, 50);
		volatile bool on = true;
		struct background bg[FLOWS];
		for (int f = 1; f < FLOWS; f++) {
			bg[f] = (struct background){.writer = w.writer[f], .data = data, .size = sizes[s], .on = &on};
			pthread_create(&bg[f].t, NULL, write_loop, &bg[f]);
		}
		for (int i = 0; i < HIGH_SAMPLES + 1; i++) {
			dds_sleepfor(DDS_USECS(rand_r(&seed) % 3000));
			uint64_t l = round_once(&w, data, sizes[s], ++seq);
			if (i)
				lat[i - 1] = l;
		}
		on = false;
		for (int f = 1; f < FLOWS; f++)
			pthread_join(bg[f].t, NULL);
		double min = pct(lat, HIGH_SAMPLES, 0), p50 = pct(lat, HIGH_SAMPLES, 50);
		double max = pct(lat, HIGH_SAMPLES, 100);
		printf("%s\n  {\"size\": %llu, \"dds_solo_us\": %.1f, \"dds_min_us\": %.1f, "
		       "\"dds_p50_us\": %.1f, \"dds_max_us\": %.1f}",
		       s ? "," : "", (unsigned long long)sizes[s], solo, min, p50, max);
		fflush(stdout);
	}
	printf("\n]}\n");
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
	return 0;
}

/* Request and reply between two namespaces, as a client on another node
 * would reach an accelerator server over DDS (the PAAM paper's remote
 * path): the writer's sample of SIZE out, the reader's small reply back,
 * timed at the writer. */
static int roundtrip(uint64_t *sizes, int nsizes, int samples, const char *rate)
{
	const char *why = bench_link_up(rate);
	if (why) {
		printf("rtaccel-dds-bench: skipped: %s\n", why);
		return 77;
	}
	pid_t child = spawn_reader(1, BENCH_NS_B_ADDR, BENCH_NS_A_ADDR);
	bench_enter_ns(bench_ns_a);
	configure(BENCH_NS_A_ADDR, BENCH_NS_B_ADDR);
	struct writer_side w;
	writer_open(&w, 1);
	uint8_t *data = calloc(1, 64u << 20);
	static uint64_t rtt[MAX_SAMPLES];
	uint64_t seq = 0;
	printf("{\"middleware\": \"cyclonedds %s\", \"transport\": \"udp\", \"link_rate\": \"%s\", "
	       "\"sizes\": [",
	       DDS_VERSION, rate);
	for (int s = 0; s < nsizes; s++) {
		for (int i = -samples / 10; i < samples; i++) { /* the first tenth warms up */
			uint64_t start = rtaccel_monotonic_ns();
			round_once(&w, data, sizes[s], ++seq);
			if (i >= 0)
				rtt[i] = rtaccel_monotonic_ns() - start;
		}
		printf("%s\n  {\"size\": %llu, \"samples\": %d, \"dds_rtt_p50_us\": %.1f, "
		       "\"dds_rtt_p99_us\": %.1f, \"dds_rtt_max_us\": %.1f}",
		       s ? "," : "", (unsigned long long)sizes[s], samples, pct(rtt, samples, 50),
		       pct(rtt, samples, 99), pct(rtt, samples, 100));
		fflush(stdout);
	}
	printf("\n]}\n");
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: rtaccel-dds-bench overhead|priority|roundtrip [--sizes LIST] "
			"[--samples N] [--rate RATE]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	uint64_t sizes[BENCH_MAX_SIZES];
	bool is_priority = strcmp(argv[1], "priority") == 0;
	bool is_roundtrip = strcmp(argv[1], "roundtrip") == 0;
	if (!is_priority && !is_roundtrip && strcmp(argv[1], "overhead") != 0)
		return usage();
	const char *default_sizes = is_priority    ? "1M,2M,4M,8M,16M,32M"
				    : is_roundtrip ? "8,64K"
						   : "64K,128K,256K,512K,1M,2M,4M,8M,16M,32M";
	int nsizes = bench_parse_sizes("rtaccel-dds-bench", default_sizes, sizes);
	int max_samples = MAX_SAMPLES;
	const char *rate = "1gbit";
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
			nsizes = bench_parse_sizes("rtaccel-dds-bench", argv[++i], sizes);
		else if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc)
			max_samples = atoi(argv[++i]);
		else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc)
			rate = argv[++i];
		else
			return usage();
	}
	if (max_samples < 20 || max_samples > MAX_SAMPLES) {
		fprintf(stderr, "rtaccel-dds-bench: --samples takes 20..%d\n", MAX_SAMPLES);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (is_roundtrip)
		return roundtrip(sizes, nsizes, max_samples, rate);
	return is_priority ? priority(sizes, nsizes, rate) : overhead(sizes, nsizes, max_samples);
}
