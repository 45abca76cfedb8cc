// What is the fewest rounds in which ANY planner can name up to two network faults on 8 nodes?
//
// An exact game search, written in C++ because the Python version of this search would take
// hours. It answers the question bench/isolation_efficiency.py cannot: whether the issue's
// target of ceil(log2 N)+2 rounds is reachable at all, and at what price.
//
// Model (the one bench/isolation_efficiency.py samples from): 8 nodes; the truth is one of
// 443 hypotheses: healthy, one slow NIC, one bad link, or two faults that share no node (two
// NICs, a NIC and a link, two links). A round is a set of disjoint jobs, each on >= 2 nodes
// (4139 possible rounds). A job is degraded iff it holds a bad NIC or both ends of a bad
// link. A planner may choose each round from all results so far; it is done for a truth when
// that truth is the only hypothesis left that explains every result. The search (AND over
// results, OR over rounds, memoized, rounds reduced by the hypotheses' symmetries) decides
// whether some planner is done for every single-fault truth within S rounds, every two-fault
// truth within D rounds, and a healthy cluster within C rounds (default S).
//
//   g++ -O2 -std=c++17 -o /tmp/isolation_optimum bench/isolation_optimum.cpp
//   /tmp/isolation_optimum S D [whole | C]   # "whole": the first round is one job on all nodes
//   /tmp/isolation_optimum --smoke           # seconds: the model's sizes and "3 3: impossible",
//                                            # without the symmetry tables (tests/ runs this)
//
// Results (docs/benchmarks.md; generating the tables takes about 1 min of each run):
//   4 4: impossible (1 min)       5 5: possible (17 min)      5 5 2: impossible (10 min)
//   5 5 3: impossible (31 min)
//   5 5 whole: impossible (1 min) 5 6 whole: impossible (35 min)
//   5 7 whole: possible (1 min)   6 6 whole: possible (19 min)
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>
using namespace std;

constexpr int N = 8, W = 7, MAXR = 12;
struct Hyp { int nic; int l1; int l2; int faults; };
static vector<Hyp> hyps;
static vector<vector<int>> moves;          // each: bitmasks of groups of >= 2 nodes
static vector<vector<uint8_t>> code;       // code[m][h]: bit j set = group j degraded
static vector<vector<int16_t>> perm_h, perm_m;

struct Set {
  uint64_t w[W];
  bool operator==(const Set& o) const { return memcmp(w, o.w, sizeof w) == 0; }
  bool has(int h) const { return (w[h >> 6] >> (h & 63)) & 1; }
  void add(int h) { w[h >> 6] |= 1ULL << (h & 63); }
};
struct SetHash {
  size_t operator()(const Set& s) const {
    uint64_t h = 1469598103934665603ULL;
    for (uint64_t x : s.w) { h ^= x; h *= 1099511628211ULL; h ^= h >> 29; }
    return h;
  }
};

static int pair_mask(int a, int b) { return (1 << a) | (1 << b); }
static array<int, 3> key(int nic, int l1, int l2) {
  if (l2 && l2 < l1) swap(l1, l2);
  return {nic, l1, l2};
}

static void make_hypotheses() {
  vector<int> pairs;
  for (int a = 0; a < N; a++) for (int b = a + 1; b < N; b++) pairs.push_back(pair_mask(a, b));
  hyps.push_back({0, 0, 0, 0});
  for (int x = 0; x < N; x++) hyps.push_back({1 << x, 0, 0, 1});
  for (int p : pairs) hyps.push_back({0, p, 0, 1});
  for (int x = 0; x < N; x++) for (int y = x + 1; y < N; y++) hyps.push_back({(1 << x) | (1 << y), 0, 0, 2});
  for (int x = 0; x < N; x++) for (int p : pairs) if (!(p >> x & 1)) hyps.push_back({1 << x, p, 0, 2});
  for (size_t i = 0; i < pairs.size(); i++)
    for (size_t j = i + 1; j < pairs.size(); j++)
      if (!(pairs[i] & pairs[j])) hyps.push_back({0, pairs[i], pairs[j], 2});
}

static void partitions(int node, vector<int>& groups) {
  if (node == N) {
    vector<int> g;
    for (int m : groups) if (__builtin_popcount(m) >= 2) g.push_back(m);
    if (!g.empty()) { sort(g.begin(), g.end()); moves.push_back(g); }
    return;
  }
  for (size_t i = 0; i < groups.size(); i++) {
    groups[i] |= 1 << node; partitions(node + 1, groups); groups[i] &= ~(1 << node);
  }
  groups.push_back(1 << node); partitions(node + 1, groups); groups.pop_back();
}

static bool degraded(const Hyp& h, int g) {
  return (h.nic & g) || (h.l1 && (h.l1 & g) == h.l1) || (h.l2 && (h.l2 & g) == h.l2);
}

static int map_mask(int m, const int* p) {
  int r = 0;
  for (int v = 0; v < N; v++) if (m >> v & 1) r |= 1 << p[v];
  return r;
}

static void make_tables(bool symmetries = true) {
  make_hypotheses();
  vector<int> groups;
  partitions(0, groups);
  sort(moves.begin(), moves.end());
  code.assign(moves.size(), vector<uint8_t>(hyps.size()));
  for (size_t m = 0; m < moves.size(); m++)
    for (size_t h = 0; h < hyps.size(); h++)
      for (size_t j = 0; j < moves[m].size(); j++)
        if (degraded(hyps[h], moves[m][j])) code[m][h] |= 1 << j;
  if (!symmetries) return;  // the search stays exact, only slower: no state is merged
  map<array<int, 3>, int> hyp_index;
  for (size_t h = 0; h < hyps.size(); h++) hyp_index[key(hyps[h].nic, hyps[h].l1, hyps[h].l2)] = h;
  map<vector<int>, int> move_index;
  for (size_t m = 0; m < moves.size(); m++) move_index[moves[m]] = m;
  int p[N];
  iota(p, p + N, 0);
  do {
    vector<int16_t> ph(hyps.size()), pm(moves.size());
    for (size_t h = 0; h < hyps.size(); h++)
      ph[h] = hyp_index[key(map_mask(hyps[h].nic, p), map_mask(hyps[h].l1, p), map_mask(hyps[h].l2, p))];
    for (size_t m = 0; m < moves.size(); m++) {
      vector<int> g;
      for (int x : moves[m]) g.push_back(map_mask(x, p));
      sort(g.begin(), g.end());
      pm[m] = move_index[g];
    }
    perm_h.push_back(move(ph));
    perm_m.push_back(move(pm));
  } while (next_permutation(p, p + N));
}

static unordered_map<Set, bool, SetHash> memo[MAXR][MAXR][MAXR];
static long long searched = 0;
static int first_move = -1, root_choice = -1;

static vector<int> members(const Set& s) {
  vector<int> v;
  for (int i = 0; i < W; i++)
    for (uint64_t x = s.w[i]; x; x &= x - 1) v.push_back(i * 64 + __builtin_ctzll(x));
  return v;
}

// Can a planner, from hypotheses S, be done for a healthy cluster within c more rounds, for
// single-fault truths within s and for two-fault truths within d?
static bool solvable(const Set& S, int c, int s, int d) {
  vector<int> e = members(S);
  if (e.size() <= 1) return true;
  bool healthy = false, singles = false, doubles = false;
  for (int h : e) (hyps[h].faults == 0 ? healthy : hyps[h].faults == 1 ? singles : doubles) = true;
  int r = max({healthy ? c : 0, singles ? s : 0, doubles ? d : 0});
  if (!healthy) c = r;  // an absent class must not constrain, and must not split the memo
  if (!singles) s = r;
  if (!doubles) d = r;
  if (c <= 0 || s <= 0 || d <= 0) return false;
  long long bound = 1;  // one round with <= 4 jobs and <= 2 faults has <= 11 outcomes
  for (int i = 0; i < r && bound < 1000000; i++) bound *= 11;
  if ((long long)e.size() > bound) return false;
  auto it = memo[c][s][d].find(S);
  if (it != memo[c][s][d].end()) return it->second;
  searched++;
  vector<int> symmetries;
  if (r >= 3)
    for (size_t p = 0; p < perm_h.size(); p++) {
      bool fixed = true;
      for (int h : e) if (!S.has(perm_h[p][h])) { fixed = false; break; }
      if (fixed) symmetries.push_back(p);
    }
  vector<pair<int, int>> order;
  for (size_t m = 0; m < moves.size(); m++) {
    if (first_move >= 0 && (int)m != first_move && e.size() == hyps.size()) continue;
    bool representative = true;
    for (int p : symmetries) if (perm_m[p][m] < (int)m) { representative = false; break; }
    if (!representative) continue;
    int count[16] = {0}, largest = 0, outcomes = 0;
    for (int h : e) count[code[m][h]]++;
    for (int n : count) if (n) { outcomes++; largest = max(largest, n); }
    if (outcomes >= 2) order.push_back({largest, (int)m});
  }
  sort(order.begin(), order.end());
  bool result = false;
  for (auto [largest, m] : order) {
    Set part[16];
    memset(part, 0, sizeof part);
    for (int h : e) part[code[m][h]].add(h);
    bool all = true;
    for (int o = 0; o < 16 && all; o++) all = solvable(part[o], c - 1, s - 1, d - 1);
    if (all) {
      result = true;
      if (e.size() == hyps.size()) root_choice = m;
      break;
    }
  }
  memo[c][s][d][S] = result;
  return result;
}

// The smoke run: the sizes the header states and a small search, both checked.
static int smoke() {
  make_tables(false);
  Set all;
  memset(&all, 0, sizeof all);
  for (size_t h = 0; h < hyps.size(); h++) all.add(h);
  bool ok = solvable(all, 3, 3, 3);
  printf("smoke: %zu hypotheses, %zu rounds, 3 3: %s (%lld states searched)\n", hyps.size(),
         moves.size(), ok ? "POSSIBLE" : "IMPOSSIBLE", searched);
  return hyps.size() == 443 && moves.size() == 4139 && !ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && string(argv[1]) == "--smoke") return smoke();
  if (argc < 3) {
    fprintf(stderr, "usage: %s SINGLE_ROUNDS DOUBLE_ROUNDS [whole | HEALTHY_ROUNDS]\n", argv[0]);
    return 2;
  }
  int s = atoi(argv[1]), d = atoi(argv[2]), c = s;
  if (argc > 3 && string(argv[3]) != "whole") c = atoi(argv[3]);
  make_tables();
  if (argc > 3 && string(argv[3]) == "whole") {
    vector<int> whole = {(1 << N) - 1};
    first_move = find(moves.begin(), moves.end(), whole) - moves.begin();
  }
  Set all;
  memset(&all, 0, sizeof all);
  for (size_t h = 0; h < hyps.size(); h++) all.add(h);
  bool ok = solvable(all, c, s, d);
  printf("N=%d, %zu hypotheses, %zu possible rounds%s: healthy within %d rounds, single faults "
         "within %d and two faults within %d: %s (%lld states searched)\n", N, hyps.size(),
         moves.size(), first_move >= 0 ? ", first round = whole group" : "", c, s, d,
         ok ? "POSSIBLE" : "IMPOSSIBLE", searched);
  if (ok) {
    printf("an optimal first round, as jobs on nodes 0-%d:", N - 1);
    for (int g : moves[root_choice]) {
      printf(" {");
      for (int v = 0; v < N; v++) if (g >> v & 1) printf("%d", v);
      printf("}");
    }
    printf("\n");
  }
  return 0;
}
